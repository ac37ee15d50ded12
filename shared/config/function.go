package config

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces/shared/awsclient"
)

// Function is how every Lambda main starts: a JSON logger on stdout and the
// environment, read once.
type Function struct {
	Log *slog.Logger
	*Env
}

// NewFunction returns the logger and the process environment.
func NewFunction() *Function {
	return &Function{Log: slog.New(slog.NewJSONHandler(os.Stdout, nil)), Env: FromOS()}
}

// Check ends the process, saying why once, when err is not nil: a function
// that cannot start must fail at once and clearly, not on its first event.
func (f *Function) Check(what string, err error) {
	if err != nil {
		f.Log.Error("cannot start: "+what, "error", err)
		os.Exit(1)
	}
}

// AWS checks every variable read so far, then loads the runtime's AWS
// configuration.
func (f *Function) AWS(ctx context.Context) aws.Config {
	f.Check("configuration", f.Err())
	cfg, err := awsclient.Load(ctx, awsclient.Options{})
	f.Check("AWS configuration", err)
	return cfg
}
