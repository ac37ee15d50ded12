package local

import (
	"errors"
	"fmt"

	"spaces/infra/demo"
	"spaces/shared/dynamostore"
)

// startDemo starts the demo world (see package demo) and points the
// stack's minter at its simulated cloud.
func (st *Stack) startDemo(cfg *Config, store *dynamostore.Store) error {
	if cfg.Minter != nil {
		return errors.New("Config.Demo brings its own minter: leave Config.Minter nil")
	}
	opts := *cfg.Demo
	if opts.Log == nil {
		opts.Log = cfg.Log.With("component", "demo")
	}
	d, err := demo.Start(opts)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	st.Demo = d
	cfg.Minter = d.Minter(store)
	return nil
}
