package local

import (
	"errors"

	"spaces/infra/demo"
)

// startDemo starts the demo world (see package demo), if Config.Demo is
// set, and points the minter at its simulated cloud; the stack's minter is
// Config.Minter otherwise.
func (st *starting) startDemo(cfg *Config) (func(), error) {
	st.Minter = cfg.Minter
	if cfg.Demo == nil {
		return nil, nil
	}
	if cfg.Minter != nil {
		return nil, errors.New("Config.Demo brings its own minter: leave Config.Minter nil")
	}
	opts := *cfg.Demo
	if opts.Log == nil {
		opts.Log = cfg.Log.With("component", "demo")
	}
	d, err := demo.Start(opts)
	if err != nil {
		return nil, err
	}
	st.Demo = d
	cfg.Minter = d.Minter(st.aws.Store(st.Table))
	st.Minter = cfg.Minter
	return d.Close, nil
}
