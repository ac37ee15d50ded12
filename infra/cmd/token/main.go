// Command token mints a development bearer token for the local stack with the
// key the local verifier trusts, and prints only the token:
//
//	curl -H "Authorization: Bearer $(go run ./infra/cmd/token -org acme)" ...
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"spaces/shared/auth"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "token:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	key := fs.String("key", auth.DefaultKeyPath, "PEM file of the development ES256 key (created if missing)")
	org := fs.String("org", "", "org_id claim (required)")
	sub := fs.String("sub", "dev", "sub claim")
	scope := fs.String("scope", "", "space-separated scopes, e.g. "+auth.ScopeInternal)
	ttl := fs.Duration("ttl", 12*time.Hour, "how long the token is valid")
	iss := fs.String("iss", auth.DefaultIssuer, "iss claim")
	aud := fs.String("aud", auth.DefaultAudience, "aud claim")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q; use flags only", fs.Args())
	}
	// Check what is cheap to check before the key file is created.
	if *org == "" {
		return errors.New("-org is required")
	}
	if *ttl <= 0 {
		return fmt.Errorf("-ttl must be positive, got %s", *ttl)
	}
	signer, err := auth.NewSigner(auth.LocalConfig{KeyPath: *key, Issuer: *iss, Audience: *aud})
	if err != nil {
		return err
	}
	token, err := signer.Mint(*org, *sub, strings.Fields(*scope), *ttl)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, token)
	return err
}
