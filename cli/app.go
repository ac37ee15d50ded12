// Package cli is the spaces command line (cobra): every command calls the
// REST API through the generated client (package client), never through
// hand-written HTTP; the one exception is the local stack's development
// sign-in, which is not part of the API. Its entry point is cli/cmd/spaces,
// and Main runs it in process, as the tests do.
//
// Scripts can rely on its exit codes (ExitOK … ExitAuth) and on -o json
// and -o yaml, which print the API's own objects.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"spaces/client"
)

// Exit codes. Each failure of the API maps to one by its problem type
// (exitCode); a script tells "not there" from "taken" from "gave up
// waiting" without reading the message.
const (
	ExitOK       = 0
	ExitError    = 1 // any other failure: the API refused the request (400, 422, 502, …) or could not be reached
	ExitUsage    = 2 // a bad command line: unknown command or flag, a missing or malformed argument
	ExitNotFound = 3 // 404: no such space, account, environment, revision or job in the org
	ExitConflict = 4 // 409 or 412: the cluster is already registered, the item changed since it was read, …
	ExitTimeout  = 5 // wait or watch gave up at --timeout
	ExitAuth     = 6 // not signed in, or the token was refused (401, 403): run spaces login
)

// Env is where the CLI reads and writes; Main's callers (the binary, the
// tests) give their own.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Getenv reads SPACES_SERVER and SPACES_TOKEN (default os.Getenv).
	Getenv func(string) string
	// ConfigDir is where login keeps its token (default
	// os.UserConfigDir()/spaces).
	ConfigDir string
	// HTTPClient sends the API's requests (default http.DefaultClient).
	HTTPClient *http.Client
	// OpenURL, when set, opens the OpenID sign-in's URL in a browser (the
	// URL is printed either way).
	OpenURL func(url string) error
}

// DefaultServer is the local stack (make run).
const DefaultServer = "http://127.0.0.1:8080"

// app is one run's state: the flags every command shares.
type app struct {
	env    Env
	server string
	output string
}

// Main runs the CLI with args (without the program name) and returns its
// exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.HTTPClient == nil {
		env.HTTPClient = http.DefaultClient
	}
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	root := newRoot(&app{env: env})
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	fmt.Fprintln(env.Stderr, "error:", err)
	if code == ExitUsage && cmd != nil {
		fmt.Fprintf(env.Stderr, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// usageError is a bad command line (ExitUsage).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// timeoutError is a wait that gave up (ExitTimeout).
type timeoutError struct{ error }

// errNotSignedIn: no token from SPACES_TOKEN or login.
var errNotSignedIn = errors.New("not signed in: run 'spaces login' (or set SPACES_TOKEN)")

func exitCode(err error) int {
	var u usageError
	var to timeoutError
	switch {
	case errors.As(err, &u) || isCobraUsage(err):
		return ExitUsage
	case errors.As(err, &to):
		return ExitTimeout
	case errors.Is(err, errNotSignedIn), errors.Is(err, client.ErrUnauthenticated), errors.Is(err, client.ErrForbidden):
		return ExitAuth
	case errors.Is(err, client.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, client.ErrConflict), errors.Is(err, client.ErrPreconditionFailed):
		return ExitConflict
	}
	return ExitError
}

// isCobraUsage: cobra's own command-line errors, which it returns as plain
// errors (flags go through FlagErrorFunc, which marks them).
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command ", "unknown flag", "unknown shorthand flag", "required flag", "invalid argument ", "accepts ", "requires at least ", "requires at most "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// serverURL: --server, else SPACES_SERVER, else the server of the last
// login, else the local stack.
func (a *app) serverURL() string {
	if a.server != "" {
		return strings.TrimSuffix(a.server, "/")
	}
	if s := a.env.Getenv("SPACES_SERVER"); s != "" {
		return strings.TrimSuffix(s, "/")
	}
	if c, err := a.loadConfig(); err == nil && c.Server != "" {
		return c.Server
	}
	return DefaultServer
}

// api is the client for the server, signed in with SPACES_TOKEN or the
// token login stored for that server.
func (a *app) api() (*client.API, error) {
	server := a.serverURL()
	token := a.env.Getenv("SPACES_TOKEN")
	if token == "" {
		c, err := a.loadConfig()
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		if c.Server == server {
			token = c.Token
		}
	}
	if token == "" {
		return nil, errNotSignedIn
	}
	return client.New(server, client.Options{Token: token, HTTPClient: a.env.HTTPClient, UserAgent: "spaces-cli"})
}

// args checks the count of positional arguments, as a usage error.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %s, got %d argument(s)", cmd.CommandPath(), names, len(args))
		}
		return nil
	}
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}
