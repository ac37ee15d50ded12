package config

import (
	"log/slog"
	"os"
	"strings"

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
	level := LogLevel(os.Getenv("AWS_LAMBDA_LOG_LEVEL"))
	f := &Function{Log: slog.New(tracing.LogHandler(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level}))), Env: FromOS()}
	t, err := tracing.FromEnv(os.LookupEnv)
	f.Check("tracing", err)
	f.Tracing = t
	return f
}

// LogLevel is the level of the function's own lines for Lambda's
// ApplicationLogLevel, which Lambda hands the runtime as
// AWS_LAMBDA_LOG_LEVEL
// (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-advanced.html):
// lines below it are not even formatted. Unset or unknown, INFO. So an
// operator who sets a function's level to DEBUG sees its debug lines
// (every probe's, for the prober) without a new build.
func LogLevel(v string) slog.Level {
	switch strings.ToUpper(v) {
	case "TRACE", "DEBUG":
		return slog.LevelDebug
	case "WARN":
		return slog.LevelWarn
	case "ERROR", "FATAL":
		return slog.LevelError
	}
	return slog.LevelInfo
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
