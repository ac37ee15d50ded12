package auth_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"spaces/shared/auth"
)

func TestKeyFileCreatedPrivatelyAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", ".local")
	path := filepath.Join(dir, "dev-jwt.pem")

	first, err := auth.NewSigner(auth.LocalConfig{KeyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("key file not created: %v", err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode = %04o, want 0600", perm)
	}
	dinfo, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := dinfo.Mode().Perm(); perm != 0o700 {
		t.Errorf("key directory mode = %04o, want 0700", perm)
	}
	pemBefore, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(pemBefore), "-----BEGIN PRIVATE KEY-----") {
		t.Errorf("key file is not a PKCS#8 PEM: %.40q", pemBefore)
	}

	// Second use: same key, same file, and tokens from the first process
	// verify in the second.
	second, err := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	if second.KeyID() != first.KeyID() {
		t.Errorf("second use has key %s, first had %s", second.KeyID(), first.KeyID())
	}
	pemAfter, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(pemAfter) != string(pemBefore) {
		t.Error("second use rewrote the key file")
	}
	tok, err := first.Mint("acme", "alice", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Authenticate(request("Bearer " + tok)); err != nil {
		t.Errorf("token from the first use refused by the second: %v", err)
	}
	// No temporary files are left behind.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("key directory holds %q, want only dev-jwt.pem", names)
	}
}

func TestKeyFileConcurrentFirstUseAgrees(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev-jwt.pem")
	const n = 8
	kids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := auth.NewSigner(auth.LocalConfig{KeyPath: path})
			if err == nil {
				kids[i] = s.KeyID()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("starter %d: %v", i, errs[i])
		}
		if kids[i] != kids[0] {
			t.Fatalf("starters disagree on the key: %s vs %s", kids[i], kids[0])
		}
	}
	v, err := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: path})
	if err != nil {
		t.Fatal(err)
	}
	if v.KeyID() != kids[0] {
		t.Errorf("stored key %s is not the one the starters used (%s)", v.KeyID(), kids[0])
	}
}

func TestKeyFileRefusedAndLeftAlone(t *testing.T) {
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"readable by others", "", 0o644, "is accessible by others (mode 0644); run chmod 600"},
		{"not PEM", "hello", 0o600, "is not PEM"},
		{"wrong block", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 0o600, `holds a "CERTIFICATE" block`},
		{"corrupt key", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", 0o600, "parse development key"},
		{"P-384 key", pkcs8PEM(t, p384), 0o600, "is not an ECDSA P-256 key"},
		{"Ed25519 key", pkcs8PEM(t, ed), 0o600, "is not an ECDSA P-256 key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "dev-jwt.pem")
			content := tc.content
			if content == "" {
				// A valid key, only with the wrong mode.
				if _, err := auth.NewSigner(auth.LocalConfig{KeyPath: path}); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				content = string(b)
			}
			if err := os.WriteFile(path, []byte(content), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, errS := auth.NewSigner(auth.LocalConfig{KeyPath: path})
			_, errV := auth.NewLocalVerifier(auth.LocalConfig{KeyPath: path})
			for _, err := range []error{errS, errV} {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("err = %v, want it to mention %q", err, tc.want)
				}
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(after) != content || info.Mode().Perm() != tc.mode {
				t.Error("a refused key file was changed")
			}
		})
	}
	t.Run("empty path", func(t *testing.T) {
		if _, err := auth.NewSigner(auth.LocalConfig{}); err == nil || !strings.Contains(err.Error(), "key path is empty") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		if _, err := auth.NewSigner(auth.LocalConfig{KeyPath: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("err = %v", err)
		}
	})
}

// pkcs8PEM encodes a generated key of the wrong kind for ES256.
func pkcs8PEM(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}
