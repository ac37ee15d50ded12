package local

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"spaces"
	"spaces/infra/emulator"
	"spaces/infra/lambdarules"
	"spaces/shared/awsclient"
	"spaces/shared/cascade"
	"spaces/shared/tracing"
	"spaces/shared/wiring"
)

// CascadeConfig is the local stack's deregistration cascade; zero values
// take the defaults.
type CascadeConfig struct {
	// Interval is how often an idle stream is polled (default 200 ms).
	Interval time.Duration
	// WrapEvents, when set, wraps the event publisher (tests count events).
	WrapEvents func(cascade.Publisher) cascade.Publisher
	// Disabled turns the stream poller off.
	Disabled bool
}

// cascadeFunction and cascadeEvent name the template's stream source.
const (
	cascadeFunction = "CascadeFunction"
	cascadeEvent    = "Deregistrations"
)

// streamCheckpoint is where a stream source's poller keeps its checkpoint:
// beside the emulator's data, whose stream it is of, when the stack
// persists; "" (in memory) when it does not.
func (st *starting) streamCheckpoint(function, event string) string {
	if st.DataDir == "" {
		return ""
	}
	return filepath.Join(st.DataDir, "stream-checkpoints", function+"."+event+".json")
}

// startCascade polls the spaces table's stream into the cascade handler, the
// way the template's event source mapping does in AWS: same filter, batch
// size, retries, bisection and failure queue.
func (st *starting) startCascade(cfg *Config) (func(), error) {
	cc := cfg.Cascade
	src, err := emulator.FunctionStreamSource(spaces.Template, cascadeFunction, cascadeEvent)
	if err != nil {
		return nil, err
	}
	table, ok := st.Resources[src.Table]
	if !ok || table.StreamARN == "" {
		return nil, fmt.Errorf("the cascade reads %s, which has no stream in the emulator", src.Table)
	}
	st.Cascade = wiring.Cascade(st.aws, wiring.CascadeSettings{Table: st.Table, EventBus: st.Resources["EventBus"].Name, Wakes: st.wakes()}, cfg.Log)
	if cc.WrapEvents != nil {
		st.Cascade.Events = cc.WrapEvents(st.Cascade.Events)
	}
	st.CascadeSource = src
	if cc.Disabled {
		return nil, nil
	}
	poller := &StreamPoller{
		Streams: emulator.Streams(st.AWS, st.EmulatorURL), StreamARN: table.StreamARN,
		Source: src, Handler: lambdarules.Handler(st.Functions.Get(cascadeFunction), tracing.Handler(cfg.Tracing, "cascade", st.Cascade.HandleStream)), Interval: cc.Interval, Log: cfg.Log,
		Checkpoint: st.streamCheckpoint(cascadeFunction, cascadeEvent),
	}
	if q, ok := st.Resources[src.OnFailure]; ok {
		poller.Failures, poller.FailureQueueURL = awsclient.SQS(st.AWS, st.EmulatorURL), q.URL
	}
	// The mapping reads the stream with the function's role.
	if err := poller.Start(lambdarules.WithFunction(context.Background(), cascadeFunction)); err != nil {
		return nil, err
	}
	return inBackground(func(ctx context.Context) { poller.Run(lambdarules.WithFunction(ctx, cascadeFunction)) }), nil
}
