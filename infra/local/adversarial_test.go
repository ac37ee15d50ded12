package local

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"spaces/shared/auth"
)

// The adversarial suite attacks the local stack over real HTTP, as an
// outside tester would, family by family: forged tokens, cross-org
// access, bad bodies, bad queries, bad paths and headers, and racing
// writes (crashes: crash_test.go). Every answer must be below 500; every
// 4xx a problem document, and every 400/401/413/415/422 naming the field
// (or header) to fix; and after all the bad requests the table holds
// exactly the items it held before, byte for byte. The discovery routes
// (namespaces, an account's clusters) are left out: without a cloud minter
// they are 503 by configuration.

// attack is one hostile request and what it must not achieve.
type attack struct {
	family, name string
	method, path string
	body         []byte // nil: no body
	headers      http.Header
	token        string // "" with noAuth: no Authorization header
	noAuth       bool
	field        string // a field the problem must name, if known
}

type adversary struct {
	t    *testing.T
	base string
	http *http.Client
	mu   sync.Mutex
	runs map[string]int // requests per family
}

func (a *adversary) send(at attack) (int, http.Header, []byte) {
	req, err := http.NewRequest(at.method, a.base+at.path, bytes.NewReader(at.body))
	if err != nil {
		a.t.Fatalf("%s/%s: %v", at.family, at.name, err)
	}
	if at.body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	if !at.noAuth {
		req.Header.Set("Authorization", "Bearer "+at.token)
	}
	for k, vs := range at.headers {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := a.http.Do(req)
	if err != nil {
		a.t.Fatalf("%s/%s: %v", at.family, at.name, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	a.mu.Lock()
	a.runs[at.family]++
	a.mu.Unlock()
	return res.StatusCode, res.Header, b
}

// refused sends a request that must be refused, and checks the refusal.
func (a *adversary) refused(at attack) {
	a.t.Helper()
	status, h, body := a.send(at)
	what := fmt.Sprintf("%s/%s: %s %s", at.family, at.name, at.method, at.path)
	if status < 400 || status >= 500 {
		a.t.Errorf("%s: status %d: %.300s", what, status, body)
		return
	}
	checkProblem(a.t, what, status, h, body, at.field)
}

// checkProblem: a 4xx is an RFC 9457 document naming what to fix.
func checkProblem(t *testing.T, what string, status int, h http.Header, body []byte, field string) {
	t.Helper()
	if ct := h.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: %d with Content-Type %q: %.200s", what, status, ct, body)
		return
	}
	var p struct {
		Type, Title, Detail string
		Status              int
		Errors              []struct{ Field, Reason string }
	}
	if err := json.Unmarshal(body, &p); err != nil || !strings.HasPrefix(p.Type, "urn:spaces:problem:") ||
		p.Title == "" || p.Detail == "" || p.Status != status {
		t.Errorf("%s: not a problem document: %.300s", what, body)
		return
	}
	named := slices.ContainsFunc(p.Errors, func(e struct{ Field, Reason string }) bool { return e.Field != "" && e.Reason != "" })
	switch status {
	case 400, 401, 413, 415, 422:
		if !named {
			t.Errorf("%s: %d names no field: %.300s", what, status, body)
		}
	}
	if field != "" && !slices.ContainsFunc(p.Errors, func(e struct{ Field, Reason string }) bool { return e.Field == field }) {
		t.Errorf("%s: %d does not name %s: %.300s", what, status, field, body)
	}
	if status == 401 && !strings.HasPrefix(h.Get("WWW-Authenticate"), `Bearer realm="spaces"`) {
		t.Errorf("%s: 401 without a Bearer challenge", what)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: missing nosniff/no-store", what)
	}
}

// snapshot is every registry item of the table (registryItems), each as
// canonical JSON, sorted.
func snapshot(t *testing.T, st *Stack) []string {
	t.Helper()
	var out []string
	for _, m := range registryItems(t, st) {
		b, _ := json.Marshal(m) // map keys are sorted
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// fixture is one org's items, made through the API before the attacks.
type fixture struct {
	account, space, space2, env, policy, revision, cursor string
}

func makeFixture(t *testing.T, c *client, cluster string) fixture {
	t.Helper()
	var f fixture
	f.account = c.account("aws")
	f.space = c.must(201, c.do("POST", "/spaces", map[string]any{"name": cluster + " space", "provider": "aws", "space_type": "kubernetes",
		"cloud_account_id": f.account, "config": configFor("aws", cluster)}))["id"].(string)
	f.space2 = c.must(201, c.do("POST", "/spaces", registerBody("aws", f.account, cluster+"-2")))["id"].(string)
	f.env = c.must(201, c.do("POST", "/environments", map[string]any{"name": cluster + "-env", "space_id": f.space}))["id"].(string)
	f.policy = c.must(201, c.do("POST", "/autoscaler-policies", map[string]any{"space_id": f.space,
		"target": map[string]any{"namespace": "web", "kind": "Deployment", "name": "api"}, "min_replicas": 1, "max_replicas": 3}))["id"].(string)
	f.revision = c.must(202, c.do("POST", "/environments/"+f.env+"/revisions", map[string]any{"manifests": manyManifests(1)}))["id"].(string)
	f.cursor = c.must(200, c.do("GET", "/spaces?limit=1", nil))["next_cursor"].(string)
	return f
}

func TestAdversarial(t *testing.T) {
	prefix := fmt.Sprintf("a%d%d-", time.Now().UnixNano()%1e6, stackSeq.Add(1))
	dataDir := t.TempDir()
	st, err := Start(context.Background(), Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: dataDir,
		Log:     slog.New(slog.DiscardHandler),
		Probing: ProbingConfig{Disabled: true},
		// Nothing but the attacks may write: no claims of the fixture's
		// revision while they run.
		Revisions: RevisionsConfig{Disabled: true},
		Cascade:   CascadeConfig{Interval: 50 * time.Millisecond},
		Names:     func(id string) string { return prefix + id },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	acme := newClient(t, st, "acme")
	globex := newClient(t, st, "globex")
	internal, err := st.Signer.Mint("acme", "ops", []string{"spaces:internal"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	globexInternal, _ := st.Signer.Mint("globex", "ops", []string{"spaces:internal"}, time.Hour)
	a := makeFixture(t, acme, "acme-secret-cluster")
	g := makeFixture(t, globex, "globex-cluster")
	gone := acme.must(201, acme.do("POST", "/spaces", registerBody("aws", a.account, "gone")))["id"].(string)
	acme.deregister(gone)

	adv := &adversary{t: t, base: st.APIURL, http: &http.Client{}, runs: map[string]int{}}
	before := snapshot(t, st)
	tok := acme.token

	// Write routes with a valid body each: the mutations below break them.
	type route struct {
		method, path string
		valid        map[string]any
		token        string
		ifMatch      bool
	}
	writes := []route{
		{"POST", "/spaces", map[string]any{"name": "new", "provider": "aws", "space_type": "kubernetes", "cloud_account_id": a.account,
			"config": configFor("aws", "brand-new"), "synthetic": false}, tok, false},
		{"POST", "/cloud-accounts", map[string]any{"provider": "aws", "name": "acct", "connection": map[string]any{
			"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": "ext-123"}}, tok, false},
		{"POST", "/environments", map[string]any{"name": "fresh", "space_id": a.space, "namespace": "fresh"}, tok, false},
		{"PUT", "/environments/" + a.env + "/space", map[string]any{"space_id": a.space}, tok, false},
		{"POST", "/autoscaler-policies", map[string]any{"space_id": a.space, "target": map[string]any{"namespace": "web", "kind": "Deployment", "name": "w"},
			"min_replicas": 1, "max_replicas": 2}, tok, false},
		{"POST", "/environments/" + a.env + "/revisions", map[string]any{"manifests": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cm"}, "data": map[string]any{"k": "v"}}}}, tok, false},
		{"PATCH", "/spaces/" + a.space + "/status", map[string]any{"status": "inactive", "reason": "test"}, internal, true},
	}

	t.Run("tokens", func(t *testing.T) {
		adv.t = t
		key := []byte("guessed-secret")
		claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
			m := jwt.MapClaims{"org_id": "acme", "sub": "x", "iss": "spaces-local", "aud": "spaces",
				"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "nbf": time.Now().Unix()}
			if edit != nil {
				edit(m)
			}
			return m
		}
		var forged []string
		none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
		forged = append(forged, none)
		for _, m := range []jwt.SigningMethod{jwt.SigningMethodHS256, jwt.SigningMethodHS384, jwt.SigningMethodHS512} {
			s, _ := jwt.NewWithClaims(m, claims(nil)).SignedString(key)
			forged = append(forged, s)
		}
		// Real signatures with the stack's own key, at the wrong time.
		for _, shift := range []time.Duration{-3 * time.Hour, 3 * time.Hour} {
			s, err := auth.NewSigner(auth.LocalConfig{KeyPath: filepath.Join(dataDir, "dev-jwt.pem"), Now: func() time.Time { return time.Now().Add(shift) }})
			if err != nil {
				t.Fatal(err)
			}
			tk, _ := s.Mint("acme", "x", nil, time.Hour)
			forged = append(forged, tk)
		}
		for _, cfg := range []auth.LocalConfig{{Issuer: "someone-else"}, {Audience: "another-api"}} {
			cfg.KeyPath = filepath.Join(dataDir, "dev-jwt.pem")
			s, err := auth.NewSigner(cfg)
			if err != nil {
				t.Fatal(err)
			}
			tk, _ := s.Mint("acme", "x", nil, time.Hour)
			forged = append(forged, tk)
		}
		// Real signatures with the stack's own key over tokens no verifier
		// may take: a crit header it does not understand (RFC 7515
		// §4.1.11), dates as numeric strings (RFC 7519 §2).
		devKey := devPrivateKey(t, filepath.Join(dataDir, "dev-jwt.pem"))
		kid := st.Signer.KeyID()
		for _, h := range []map[string]any{{"crit": []string{"x-unknown"}, "x-unknown": true}, {"crit": []string{}}} {
			tk := jwt.NewWithClaims(jwt.SigningMethodES256, claims(nil))
			tk.Header["kid"] = kid
			for k, v := range h {
				tk.Header[k] = v
			}
			s, _ := tk.SignedString(devKey)
			forged = append(forged, s)
		}
		for _, claim := range []string{"exp", "nbf", "iat"} {
			tk := jwt.NewWithClaims(jwt.SigningMethodES256, claims(func(m jwt.MapClaims) { m[claim] = fmt.Sprint(m[claim]) }))
			tk.Header["kid"] = kid
			s, _ := tk.SignedString(devKey)
			forged = append(forged, s)
		}
		parts := strings.Split(tok, ".")
		for _, edit := range []func(jwt.MapClaims){
			func(m jwt.MapClaims) { m["org_id"] = "globex" },
			func(m jwt.MapClaims) { m["scope"] = "spaces:internal" },
			func(m jwt.MapClaims) { m["exp"] = time.Now().Add(100 * 365 * 24 * time.Hour).Unix() },
		} {
			// A real header and signature around another payload.
			payload, _ := json.Marshal(claims(edit))
			forged = append(forged, parts[0]+"."+base64.RawURLEncoding.EncodeToString(payload)+"."+parts[2])
		}
		forged = append(forged, parts[0]+"."+parts[1]+".", parts[0]+"."+parts[1], tok+".x", tok[:len(tok)-3],
			parts[0]+"."+parts[1]+"."+strings.Repeat("A", len(parts[2])), "a.b.c", "....", strings.Repeat("x", 9000),
			"\u00e9\u00e9.\u00e9.\u00e9", tok+tok, strings.ToUpper(tok))
		headers := []string{"Basic YWNtZTpwYXNz", "Bearer", "Bearer  ", "Token " + tok, "bearer" + tok, "Bearer " + tok + " extra"}
		routes := []struct{ method, path string }{
			{"GET", "/spaces"}, {"POST", "/spaces"}, {"GET", "/spaces/" + a.space}, {"DELETE", "/spaces/" + a.space},
			{"PATCH", "/spaces/" + a.space + "/status"}, {"GET", "/environments/" + a.env}, {"POST", "/revisions/" + a.revision + "/retry"},
		}
		for _, rt := range routes {
			body := []byte(`{"status":"inactive"}`)
			for i, f := range forged {
				adv.refused(attack{family: "tokens", name: fmt.Sprintf("forged %d", i), method: rt.method, path: rt.path, body: body, token: f, field: "Authorization"})
			}
			for i, h := range headers {
				adv.refused(attack{family: "tokens", name: fmt.Sprintf("header %d", i), method: rt.method, path: rt.path, body: body, noAuth: true,
					headers: http.Header{"Authorization": {h}}, field: "Authorization"})
			}
			adv.refused(attack{family: "tokens", name: "two headers", method: rt.method, path: rt.path, body: body, noAuth: true,
				headers: http.Header{"Authorization": {"Bearer " + tok, "Bearer " + tok}}, field: "Authorization"})
			adv.refused(attack{family: "tokens", name: "none", method: rt.method, path: rt.path, body: body, noAuth: true, field: "Authorization"})
		}
	})

	t.Run("cross-org", func(t *testing.T) {
		adv.t = t
		gt := globex.token
		body := func(m map[string]any) []byte { b, _ := json.Marshal(m); return b }
		reads := []attack{
			{name: "get space", method: "GET", path: "/spaces/" + a.space},
			{name: "deregister space", method: "DELETE", path: "/spaces/" + a.space},
			{name: "deregister space with If-Match", method: "DELETE", path: "/spaces/" + a.space, headers: http.Header{"If-Match": {`"1"`}}},
			{name: "set status", method: "PATCH", path: "/spaces/" + a.space + "/status", token: globexInternal, body: body(map[string]any{"status": "inactive"}), headers: http.Header{"If-Match": {`*`}}},
			{name: "history", method: "GET", path: "/spaces/" + a.space + "/status-history"},
			{name: "get account", method: "GET", path: "/cloud-accounts/" + a.account},
			{name: "delete account", method: "DELETE", path: "/cloud-accounts/" + a.account},
			{name: "get environment", method: "GET", path: "/environments/" + a.env},
			{name: "rebind their environment", method: "PUT", path: "/environments/" + a.env + "/space", body: body(map[string]any{"space_id": g.space})},
			{name: "rebind to their space", method: "PUT", path: "/environments/" + g.env + "/space", body: body(map[string]any{"space_id": a.space})},
			{name: "get policy", method: "GET", path: "/autoscaler-policies/" + a.policy},
			{name: "get revision", method: "GET", path: "/revisions/" + a.revision},
			{name: "retry revision", method: "POST", path: "/revisions/" + a.revision + "/retry"},
			{name: "push to their environment", method: "POST", path: "/environments/" + a.env + "/revisions", body: body(map[string]any{"manifests": manyManifests(1)})},
			{name: "register on their account", method: "POST", path: "/spaces", body: body(registerBody("aws", a.account, "stolen")), field: "cloud_account_id"},
			{name: "synthetic space on their account", method: "POST", path: "/spaces", body: body(func() map[string]any {
				m := registerBody("aws", a.account, "acme-secret-cluster")
				m["synthetic"] = true
				return m
			}()), field: "cloud_account_id"},
			{name: "environment on their space", method: "POST", path: "/environments", body: body(map[string]any{"name": "steal", "space_id": a.space})},
			{name: "policy on their space", method: "POST", path: "/autoscaler-policies", body: body(map[string]any{"space_id": a.space,
				"target": map[string]any{"namespace": "web", "kind": "Deployment", "name": "w"}, "min_replicas": 1, "max_replicas": 2})},
			{name: "their cursor", method: "GET", path: "/spaces?limit=1&cursor=" + a.cursor, field: "cursor"},
			{name: "their cursor on accounts", method: "GET", path: "/cloud-accounts?cursor=" + a.cursor, field: "cursor"},
		}
		for _, at := range reads {
			at.family = "cross-org"
			if at.token == "" {
				at.token = gt
			}
			status, h, b := adv.send(at)
			what := "cross-org/" + at.name
			if status < 400 || status >= 500 {
				t.Errorf("%s: %d %.300s", what, status, b)
				continue
			}
			checkProblem(t, what, status, h, b, at.field)
			if status == 403 {
				t.Errorf("%s: 403 tells that the item exists; another org's item is 404", what)
			}
			// Nothing of acme's beyond the id the attacker sent.
			for _, secret := range []string{"acme-secret-cluster", "aws prod", `"acme"`, "arn:aws:iam"} {
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s: the answer leaks %q: %s", what, secret, b)
				}
			}
		}
	})

	t.Run("bad bodies", func(t *testing.T) {
		adv.t = t
		rng := rand.New(rand.NewPCG(9, 9))
		junk := []string{"\xff", "\xc3", "LONE-SURROGATE", "\u202e", "\ufeff", "\u200b", "\u0085", "\x00", "\x1b[31m"}
		for _, rt := range writes {
			headers := http.Header{}
			if rt.ifMatch {
				headers.Set("If-Match", `*`)
			}
			keys := slices.Sorted(func(yield func(string) bool) {
				for k := range rt.valid {
					if !yield(k) {
						return
					}
				}
			})
			valid, _ := json.Marshal(rt.valid)
			send := func(name string, body []byte, field string, hdr ...string) {
				h := headers.Clone()
				for i := 0; i+1 < len(hdr); i += 2 {
					h.Set(hdr[i], hdr[i+1])
				}
				adv.refused(attack{family: "bad bodies", name: name, method: rt.method, path: rt.path, body: body, token: rt.token, headers: h, field: field})
			}
			for _, k := range keys {
				// A value of the wrong JSON type for each field.
				for _, wrong := range []any{12, 1.5, true, []any{"x"}, map[string]any{"x": 1}, "s"} {
					if sameJSONType(rt.valid[k], wrong) {
						continue
					}
					m := clone(rt.valid)
					m[k] = wrong
					b, _ := json.Marshal(m)
					send("wrong type "+k, b, k)
				}
				// The key twice, the second value valid too.
				v, _ := json.Marshal(rt.valid[k])
				dup := append([]byte(`{"`+k+`":`), v...)
				dup = append(dup, ',')
				send("duplicate "+k, append(dup, valid[1:]...), k)
				// Broken text inside a string of the field, if it has one.
				if s, ok := rt.valid[k].(string); ok {
					for _, j := range junk {
						m := clone(rt.valid)
						m[k] = s[:len(s)/2] + j + s[len(s)/2:]
						b, _ := json.Marshal(m)
						// json.Marshal cannot write a lone surrogate.
						b = bytes.Replace(b, []byte("LONE-SURROGATE"), []byte(`\ud800`), 1)
						// json.Marshal repairs invalid UTF-8; put the bytes back.
						if j == "\xff" || j == "\xc3" {
							b = bytes.Replace(b, []byte(`\ufffd`), []byte(j), 1)
						}
						send(fmt.Sprintf("text %q in %s", j, k), b, "")
					}
				}
			}
			// An unknown field of a random name.
			for i := range 5 {
				m := clone(rt.valid)
				name := fmt.Sprintf("x%d_%x", i, rng.Uint32())
				m[name] = "v"
				b, _ := json.Marshal(m)
				send("unknown field", b, name)
			}
			// Truncations and random bytes are never a JSON object.
			for range 20 {
				send("truncated", valid[:rng.IntN(len(valid)-1)], "body")
			}
			for range 20 {
				b := make([]byte, 1+rng.IntN(300))
				for i := range b {
					b[i] = byte(rng.UintN(256))
				}
				if b[0] == '{' || b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r' {
					b[0] = '#'
				}
				send("random bytes", b, "body")
			}
			for _, s := range []string{"", "null", "[]", `"x"`, "1", valid2(valid), strings.Repeat("[", 20000)} {
				send("not an object", []byte(s), "body")
			}
			send("too large", append(append([]byte(`{"name":"`), bytes.Repeat([]byte("x"), 70<<10)...), `"}`...), "body")
			send("wrong content type", valid, "Content-Type", "Content-Type", "text/plain")
			send("nested depth", []byte(`{"`+keys[0]+`":`+strings.Repeat(`{"a":`, 11000)+`1`+strings.Repeat("}", 11000)+`}`), "")
		}
		// Revision manifests past DynamoDB's limits, and outside the namespace.
		push := "/environments/" + a.env + "/revisions"
		manifest := func(extra string) []byte {
			return []byte(`{"manifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}` + extra + `}]}`)
		}
		for _, c := range []struct{ name, extra, field string }{
			{"empty key", `,"data":{"":"x"}`, "manifests[0].data"},
			{"empty nested key", `,"spec":{"a":[{"":1}]}`, "manifests[0].spec.a[0]"},
			{"33 levels", `,"x":` + strings.Repeat(`{"a":`, 31) + `1` + strings.Repeat(`}`, 31), ""},
			{"39 digits", `,"n":123456789012345678901234567890123456789`, "manifests[0].n"},
			{"1e126", `,"n":1e126`, "manifests[0].n"},
			{"1e-131", `,"n":1e-131`, "manifests[0].n"},
			{"exponent overflow", `,"n":1e999999999999`, "manifests[0].n"},
			{"cluster-scoped kind", `,"kind":"ClusterRoleBinding"`, ""},
		} {
			adv.refused(attack{family: "bad bodies", name: c.name, method: "POST", path: push, body: manifest(c.extra), token: tok, field: c.field})
		}
		for _, kind := range []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PersistentVolume", "StorageClass", "ValidatingWebhookConfiguration"} {
			b := []byte(`{"manifests":[{"apiVersion":"v1","kind":"` + kind + `","metadata":{"name":"x"}}]}`)
			adv.refused(attack{family: "bad bodies", name: "kind " + kind, method: "POST", path: push, body: b, token: tok, field: "manifests[0].kind"})
		}
		policy := func(target string) []byte {
			return []byte(`{"space_id":"` + a.space + `","target":` + target + `,"min_replicas":1,"max_replicas":2}`)
		}
		for _, target := range []string{`{"Namespace":"web","kind":"Deployment","name":"w"}`, `{"namespace":"web","KIND":"Deployment","name":"w"}`,
			`{"namespace":"web","kind":"Deployment","name":"w","name":"v"}`} {
			adv.refused(attack{family: "bad bodies", name: "policy target " + target, method: "POST", path: "/autoscaler-policies", body: policy(target), token: tok})
		}
	})

	t.Run("bad queries", func(t *testing.T) {
		adv.t = t
		lists := []string{"/spaces", "/cloud-accounts", "/environments", "/autoscaler-policies", "/spaces/" + a.space + "/status-history"}
		queries := []struct{ q, field string }{
			{"provider=gc%zz", "provider"}, {"limit=1&limit=%zz", "limit"}, {"limit=%", "limit"}, {"cursor=%zz", "cursor"},
			{"limit=0", "limit"}, {"limit=-1", "limit"}, {"limit=abc", "limit"}, {"limit=1e3", "limit"}, {"limit=99999999999999999999", "limit"},
			{"limit=1&limit=2", "limit"}, {"cursor=abc", "cursor"}, {"cursor=" + g.cursor, "cursor"}, {"cursor=" + strings.Repeat("A", 5000), "cursor"},
			{"evil=1", "evil"}, {"org_id=globex", "org_id"}, {"=x", "query"}, {"%zz=1", "%zz"}, {"Limit=5", "Limit"},
		}
		for _, l := range lists {
			for _, q := range queries {
				adv.refused(attack{family: "bad queries", name: q.q, method: "GET", path: l + "?" + q.q, token: tok, field: q.field})
			}
		}
		for _, q := range []struct{ q, field string }{
			{"provider=oracle", "provider"}, {"provider=AWS", "provider"}, {"status=dead", "status"}, {"space_type=vm", "space_type"},
			{"cloud_account_id=x", "cloud_account_id"}, {"picker=all", "picker"}, {"provider=aws&provider=gcp", "provider"},
			{"status=active%00", "status"}, {"provider=aws%20", "provider"},
		} {
			adv.refused(attack{family: "bad queries", name: q.q, method: "GET", path: "/spaces?" + q.q, token: tok, field: q.field})
		}
	})

	t.Run("bad paths and headers", func(t *testing.T) {
		adv.t = t
		for _, p := range []string{"//spaces", "/./spaces", "/spaces/../cloud-accounts", "/spaces/%2e%2e/cloud-accounts", "/spaces/" + a.space + "/./status",
			"/spaces/" + a.space + "/", "/spaces/x", "/spaces/" + strings.ToUpper(a.space), "/spaces/" + a.space + "%00", "/spaces/" + gone,
			"/revisions/" + a.space, "/environments/" + a.space, "/nope", "/spaces/" + a.space + "/status-history/x", "/%ff"} {
			adv.refused(attack{family: "bad paths", name: p, method: "GET", path: p, token: tok})
		}
		for _, m := range []string{"PUT", "TRACE", "PATCH", "POST"} {
			adv.refused(attack{family: "bad paths", name: "method " + m, method: m, path: "/spaces/" + a.space, token: tok})
		}
		status := "/spaces/" + a.space + "/status"
		body := []byte(`{"status":"inactive","reason":"x"}`)
		for _, c := range []struct{ ifMatch, field string }{
			{`W/"1"`, "If-Match"}, {`"1", "2"`, "If-Match"}, {`1`, "If-Match"}, {`"0"`, "If-Match"}, {`"abc"`, "If-Match"},
			{`"99"`, ""}, {`""`, "If-Match"}, {`*, "1"`, "If-Match"},
		} {
			adv.refused(attack{family: "bad headers", name: "If-Match " + c.ifMatch, method: "PATCH", path: status, body: body, token: internal,
				headers: http.Header{"If-Match": {c.ifMatch}}, field: c.field})
			adv.refused(attack{family: "bad headers", name: "DELETE If-Match " + c.ifMatch, method: "DELETE", path: "/spaces/" + a.space, token: tok,
				headers: http.Header{"If-Match": {c.ifMatch}}, field: c.field})
		}
		adv.refused(attack{family: "bad headers", name: "no If-Match", method: "PATCH", path: status, body: body, token: internal})
		adv.refused(attack{family: "bad headers", name: "no scope", method: "PATCH", path: status, body: body, token: tok, headers: http.Header{"If-Match": {`*`}}})
		reg, _ := json.Marshal(registerBody("aws", a.account, "idem"))
		for _, k := range []string{"has space", "\u00e9", strings.Repeat("k", 256), "tab\tkey"} {
			adv.refused(attack{family: "bad headers", name: "Idempotency-Key " + k, method: "POST", path: "/spaces", body: reg, token: tok,
				headers: http.Header{"Idempotency-Key": {k}}, field: "Idempotency-Key"})
		}
		for _, ct := range []string{"text/json", "application/x-www-form-urlencoded", "application/json; charset=\"", "multipart/form-data"} {
			adv.refused(attack{family: "bad headers", name: "Content-Type " + ct, method: "POST", path: "/spaces", body: reg, token: tok,
				headers: http.Header{"Content-Type": {ct}}, field: "Content-Type"})
		}
	})

	if after := snapshot(t, st); !slices.Equal(after, before) {
		t.Errorf("the attacks changed stored items:\nbefore %d items, after %d\n%s", len(before), len(after), firstDiff(before, after))
	}

	// Racing writes: each race has exactly one winner, the losers get a
	// problem, and nothing answers 5xx.
	t.Run("concurrency", func(t *testing.T) {
		adv.t = t
		race := func(n int, at func(i int) attack) map[int]int {
			var mu sync.Mutex
			codes := map[int]int{}
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					a := at(i)
					a.family = "concurrency"
					status, h, b := adv.send(a)
					if status >= 500 {
						t.Errorf("%s: %d %.200s", a.name, status, b)
					} else if status >= 400 {
						checkProblem(t, "concurrency/"+a.name, status, h, b, "")
					}
					mu.Lock()
					codes[status]++
					mu.Unlock()
				})
			}
			wg.Wait()
			return codes
		}
		reg, _ := json.Marshal(registerBody("aws", a.account, "raced"))
		if codes := race(50, func(int) attack {
			return attack{name: "register the same cluster", method: "POST", path: "/spaces", body: reg, token: tok}
		}); codes[201] != 1 || codes[409] != 49 {
			t.Errorf("50 racing registrations: %v, want one 201 and 49 409", codes)
		}
		idem, _ := json.Marshal(registerBody("aws", a.account, "idem-raced"))
		if codes := race(20, func(int) attack {
			return attack{name: "same Idempotency-Key", method: "POST", path: "/spaces", body: idem, token: tok, headers: http.Header{"Idempotency-Key": {"race-1"}}}
		}); codes[201] != 20 {
			t.Errorf("20 racing replays of one key: %v, want 20 201", codes)
		}
		ids := acme.must(200, acme.do("GET", "/spaces?limit=100", nil))["items"].([]any)
		n := 0
		for _, s := range ids {
			if s.(map[string]any)["config"].(map[string]any)["clusterName"] == "idem-raced" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("one Idempotency-Key registered %d spaces", n)
		}
		v := acme.must(200, acme.do("GET", "/spaces/"+a.space, nil))["version"].(float64)
		patch := []byte(`{"status":"inactive","reason":"race"}`)
		if codes := race(20, func(int) attack {
			return attack{name: "PATCH with one If-Match", method: "PATCH", path: "/spaces/" + a.space + "/status", body: patch, token: internal,
				headers: http.Header{"If-Match": {fmt.Sprintf(`"%d"`, int(v))}}}
		}); codes[200] != 1 || codes[412] != 19 {
			t.Errorf("20 racing PATCHes of one version: %v, want one 200 and 19 412", codes)
		}
		ev := acme.must(200, acme.do("GET", "/environments/"+a.env, nil))["version"].(float64)
		rebind := []byte(`{"space_id":"` + a.space2 + `"}`)
		if codes := race(20, func(int) attack {
			return attack{name: "rebind with one If-Match", method: "PUT", path: "/environments/" + a.env + "/space", body: rebind, token: tok,
				headers: http.Header{"If-Match": {fmt.Sprintf(`"%d"`, int(ev))}}}
		}); codes[200] != 1 || codes[412] != 19 {
			t.Errorf("20 racing rebinds of one version: %v, want one 200 and 19 412", codes)
		}
		if codes := race(20, func(int) attack {
			return attack{name: "deregister", method: "DELETE", path: "/spaces/" + g.space, token: globex.token}
		}); codes[204] != 1 || codes[404] != 19 {
			t.Errorf("20 racing deregistrations: %v, want one 204 and 19 404", codes)
		}
	})
	total := 0
	for f, n := range adv.runs {
		total += n
		t.Logf("%s: %d requests", f, n)
	}
	t.Logf("%d adversarial requests, none answered 5xx", total)
}

// devPrivateKey reads the stack's development signing key.
func devPrivateKey(t *testing.T, path string) *ecdsa.PrivateKey {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(*ecdsa.PrivateKey)
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sameJSONType reports whether a and b encode as the same JSON type.
func sameJSONType(a, b any) bool {
	kind := func(v any) string {
		raw, _ := json.Marshal(v)
		switch raw[0] {
		case '{':
			return "object"
		case '[':
			return "array"
		case '"':
			return "string"
		case 't', 'f':
			return "bool"
		default:
			return "number"
		}
	}
	return kind(a) == kind(b)
}

// valid2 is a valid body followed by a second object.
func valid2(valid []byte) string { return string(valid) + string(valid) }

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return "first difference:\n" + a[i] + "\n" + b[i]
		}
	}
	return ""
}
