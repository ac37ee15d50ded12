package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"spaces/shared/auth"
)

func TestRunPrintsAVerifiableToken(t *testing.T) {
	key := filepath.Join(t.TempDir(), ".local", "dev-jwt.pem")
	var out, errOut bytes.Buffer
	err := run([]string{"-key", key, "-org", "acme", "-scope", "spaces:internal  spaces:read", "-ttl", "5m"}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr = %q, want nothing", errOut.String())
	}
	// Only the token and a newline, so $(...) can wrap it.
	tok, ok := strings.CutSuffix(out.String(), "\n")
	if !ok || strings.ContainsAny(tok, " \n") || strings.Count(tok, ".") != 2 {
		t.Fatalf("output %q is not one token line", out.String())
	}
	v, err := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: key})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/spaces", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	p, err := v.Authenticate(r)
	if err != nil {
		t.Fatal(err)
	}
	if p.OrgID != "acme" || p.Subject != "dev" || !slices.Equal(p.Scopes, []string{auth.ScopeInternal, "spaces:read"}) {
		t.Errorf("principal = %+v", p)
	}
}

func TestRunHonoursIssuerAndAudience(t *testing.T) {
	key := filepath.Join(t.TempDir(), "k.pem")
	var out bytes.Buffer
	if err := run([]string{"-key", key, "-org", "acme", "-iss", "other", "-aud", "elsewhere"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/spaces", nil)
	r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(out.String()))
	for _, tc := range []struct {
		cfg    auth.LocalConfig
		wantOK bool
	}{
		{auth.LocalConfig{KeyPath: key}, false},
		{auth.LocalConfig{KeyPath: key, Issuer: "other", Audience: "elsewhere"}, true},
	} {
		v, err := auth.NewLocalVerifier(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Authenticate(r); (err == nil) != tc.wantOK {
			t.Errorf("verifier %+v: err = %v, want ok=%v", tc.cfg, err, tc.wantOK)
		}
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k.pem")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no org", []string{"-key", key}, "-org is required"},
		{"stray argument", []string{"-key", key, "-org", "acme", "extra"}, "unexpected arguments"},
		{"zero ttl", []string{"-key", key, "-org", "acme", "-ttl", "0s"}, "-ttl must be positive"},
		{"bad ttl", []string{"-key", key, "-org", "acme", "-ttl", "soon"}, "invalid value"},
		{"unknown flag", []string{"-key", key, "-org", "acme", "-admin"}, "flag provided but not defined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(tc.args, &out, &errOut)
			if err == nil || !strings.Contains(err.Error()+errOut.String(), tc.want) {
				t.Errorf("err = %v, stderr %q, want %q", err, errOut.String(), tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want nothing on failure", out.String())
			}
		})
	}
	// Input refused before the key is needed leaves no key behind.
	if _, err := os.Stat(key); !os.IsNotExist(err) {
		t.Errorf("a refused run created the key file (stat: %v)", err)
	}
}
