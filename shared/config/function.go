package config

import (
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces/shared/awsclient"
	"spaces/shared/tracing"
)

// Function is how every Lambda main starts: a JSON logger on stdout whose
// lines carry the trace and request ids (tracing.LogHandler), the tracer
// provider and the environment, read once.
type Function struct {
	Log *slog.Logger
	// Tracing is the function's tracer provider (tracing.FromEnv); its main
	// wraps the handler with tracing.Handler.
	Tracing *tracing.Tracing
	*Env
}

// NewFunction returns the logger, the tracer provider and the process
// environment.
func NewFunction() *Function {
	f := &Function{Log: slog.New(tracing.LogHandler(slog.NewJSONHandler(os.Stdout, nil))), Env: FromOS()}
	t, err := tracing.FromEnv(os.LookupEnv)
	f.Check("tracing", err)
	f.Tracing = t
	return f
}

// Check ends the process, saying why once, when err is not nil: a function
// that cannot start must fail at once and clearly, not on its first event.
func (f *Function) Check(what string, err error) {
	if err != nil {
		f.Log.Error("cannot start: "+what, "error", err)
		os.Exit(1)
	}
}

// AWS checks every variable read so far, then reads the runtime's AWS
// configuration (awsclient.FromEnv).
func (f *Function) AWS() aws.Config {
	f.Check("configuration", f.Err())
	cfg, err := awsclient.FromEnv(f.Lookup)
	f.Check("AWS configuration", err)
	return cfg
}
