package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// signInConfig is the part of the console's GET /console/config.json that
// says how a user signs in to this server.
type signInConfig struct {
	SignIn    string `json:"sign_in"`
	DevSignIn string `json:"dev_sign_in"`
	Issuer    string `json:"issuer"`
	ClientID  string `json:"client_id"`
	Scope     string `json:"scope"`
	Audience  string `json:"audience"`
}

func loginCmd(a *app) *cobra.Command {
	var org string
	var withToken bool
	var port int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign in and keep the token for the next commands",
		Long: `Sign in to a Spaces server and keep the token in the user's config folder
(` + "`os.UserConfigDir()`" + `/spaces/config.json, readable by the user alone).

The server says how to sign in (the console's /console/config.json):

  * the local stack (make run) has a development sign-in for any org:
    --org names it;
  * a deployed stack signs in with its OpenID provider, as the console
    does: the authorization code flow with PKCE, its redirect on a loopback
    port of this machine (RFC 8252), as gh auth login and az login do.
    Open the printed URL in a browser; --port fixes the port when the
    provider allows only registered redirect URLs
    (http://127.0.0.1:PORT/callback).
  * --with-token reads a token on standard input instead (the token never
    goes on the command line, where other users' ps and the shell history
    see it).`,
		Example: `  # The local stack, as org acme
  spaces login --org acme

  # Another local stack
  spaces login --server http://127.0.0.1:9090 --org acme

  # A deployed stack: sign in with its identity provider in a browser
  spaces login --server https://abc123.execute-api.eu-west-1.amazonaws.com --port 8765

  # A deployed stack, with a token you already have
  spaces login --server https://abc123.execute-api.eu-west-1.amazonaws.com --with-token < token.txt`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			server := a.serverURL()
			var c config
			var err error
			switch {
			case withToken:
				c, err = tokenFromStdin(cmd.InOrStdin())
			default:
				var sc signInConfig
				if sc, err = a.signInConfig(cmd.Context(), server); err != nil {
					return err
				}
				switch sc.SignIn {
				case "dev":
					c, err = a.devSignIn(cmd.Context(), server, sc, org)
				case "oidc":
					if org != "" {
						return usagef("%s signs in with its OpenID provider, which says the org: drop --org", server)
					}
					c, err = a.oidcSignIn(cmd.Context(), cmd.ErrOrStderr(), sc, port, timeout)
				default:
					err = fmt.Errorf("%s signs in by %q, which this CLI does not know: pass a token with --with-token", server, sc.SignIn)
				}
			}
			if err != nil {
				return err
			}
			c.Server = server
			// The token must work before it is kept.
			if _, err := a.whoCanList(cmd.Context(), c); err != nil {
				return fmt.Errorf("the token was not accepted by %s: %w", server, err)
			}
			path, err := a.saveConfig(c)
			if err != nil {
				return err
			}
			who := "signed in to " + server
			if c.Org != "" {
				who += " as org " + c.Org
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s (token kept in %s)\n", who, path)
			return nil
		},
	}
	cmd.Flags().StringVar(&org, "org", "", "the org to sign in as (the local stack's development sign-in)")
	cmd.Flags().BoolVar(&withToken, "with-token", false, "read a bearer token from standard input")
	cmd.Flags().IntVar(&port, "port", 0, "the loopback port of the OpenID sign-in's redirect (default any free port)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the browser's sign-in")
	return cmd
}

func logoutCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "logout",
		Short:   "Forget the stored token",
		Example: "  spaces logout",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.removeConfig(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "signed out")
			return nil
		},
	}
}

func tokenFromStdin(r io.Reader) (config, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return config{}, err
	}
	token := strings.TrimSpace(line)
	if token == "" || strings.ContainsAny(token, " \t") {
		return config{}, usagef("--with-token reads one token from standard input, got %d characters", len(token))
	}
	return config{Token: token}, nil
}

// devSignIn signs in with the local stack's development sign-in, which the
// console's config names (it is not part of the API: no deployed stack
// has it).
func (a *app) devSignIn(ctx context.Context, server string, sc signInConfig, org string) (config, error) {
	if sc.DevSignIn == "" {
		return config{}, fmt.Errorf("%s names no development sign-in", server)
	}
	if org == "" {
		return config{}, usagef("the local stack's sign-in needs --org")
	}
	body, _ := json.Marshal(map[string]string{"org": org})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+sc.DevSignIn, bytes.NewReader(body))
	if err != nil {
		return config{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := a.env.HTTPClient.Do(req)
	if err != nil {
		return config{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return config{}, err
	}
	if res.StatusCode != http.StatusOK {
		var p struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(raw, &p)
		return config{}, fmt.Errorf("sign-in refused (%d): %s", res.StatusCode, p.Detail)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if err := json.Unmarshal(raw, &tok); err != nil || tok.AccessToken == "" {
		return config{}, fmt.Errorf("sign-in answered no token")
	}
	return config{Token: tok.AccessToken, Org: org, ExpiresAt: time.Now().Add(time.Duration(tok.ExpiresIn) * time.Second).UTC().Truncate(time.Second)}, nil
}

func (a *app) signInConfig(ctx context.Context, server string) (signInConfig, error) {
	var sc signInConfig
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/console/config.json", nil)
	if err != nil {
		return sc, err
	}
	res, err := a.env.HTTPClient.Do(req)
	if err != nil {
		return sc, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return sc, fmt.Errorf("%s does not say how to sign in (GET /console/config.json: %d): pass a token with --with-token", server, res.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&sc); err != nil {
		return sc, fmt.Errorf("GET /console/config.json: %w", err)
	}
	return sc, nil
}
