package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"spaces/shared/space"
)

// The fuzz targets of the request decoders. `make test` runs their seeds
// (f.Add and testdata/fuzz); `make fuzz` runs each for a fixed time.

// checkRefusal fails unless err is a 4xx the client can act on: a
// malformed-request problem naming at least one field, or a 413/415 naming
// the body or header.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var he *httpError
	if errors.As(err, &he) {
		if he.status < 400 || he.status >= 500 || he.field == "" {
			t.Fatalf("HTTP refusal %d without a field: %v", he.status, err)
		}
		return
	}
	var de *space.Error
	if !errors.As(err, &de) || de.Kind != space.KindMalformed || len(de.Fields) == 0 {
		t.Fatalf("refusal is not a 400 naming a field: %#v", err)
	}
	for _, f := range de.Fields {
		if f.Field == "" || f.Reason == "" {
			t.Fatalf("field error without a name or reason: %+v", de.Fields)
		}
	}
}

func FuzzReadObject(f *testing.F) {
	for _, s := range []string{
		`{"name":"prod","provider":"aws","config":{"clusterName":"c","region":"us-east-1"},"synthetic":false}`,
		`{"manifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"":"x"}}]}`,
		`{"manifests":[{"n":9007199254740993,"f":-1.5e-300}]}`,
		`{"target":{"namespace":"a","kind":"Deployment","name":"w"},"min_replicas":1}`,
		`{"target":{"NAMESPACE":"a"}}`,
		`{"name":"a","name":"b"}`,
		`{"config":{"region":"x","region":"y"}}`,
		"{\"name\":\"\xff\"}",
		`{"name":"\ud800"}`,
		`{"name":"\ud83d\ude00"}`,
		`{"name":"\\ud800"}`,
		`{} {}`, `[]`, `null`, ``, ` `, `{"unknown":1}`, `{"min_replicas":1.5}`,
		strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in struct {
			Name, Provider string
			Config         map[string]string
			Synthetic      bool
			Manifests      []map[string]any
			Target         *policyTarget
			Min            *int
		}
		r := httptest.NewRequest("POST", "/x", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		err := readObject(httptest.NewRecorder(), r, map[string]any{
			"name": &in.Name, "provider": &in.Provider, "config": &in.Config, "synthetic": &in.Synthetic,
			"manifests": &in.Manifests, "target": &in.Target, "min_replicas": &in.Min,
		})
		if err != nil {
			checkRefusal(t, err)
			return
		}
		// Accepted: what was decoded is what was sent.
		if !utf8.Valid(body) || hasLoneSurrogate(body) {
			t.Fatalf("accepted invalid UTF-8: %q", body)
		}
		if p, dup := duplicateKey(body); dup {
			t.Fatalf("accepted a duplicate key %s: %q", p, body)
		}
		for _, s := range append([]string{in.Name, in.Provider}, valuesOf(in.Config)...) {
			if strings.ContainsRune(s, utf8.RuneError) && !bytes.Contains(body, []byte("\uFFFD")) && !bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) {
				t.Fatalf("a replacement character appeared from nowhere: %q", body)
			}
		}
		if _, err := json.Marshal(in.Manifests); err != nil {
			t.Fatalf("accepted manifests cannot be encoded again: %v", err)
		}
	})
}

func valuesOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func FuzzQuery(f *testing.F) {
	for _, s := range []string{
		"", "provider=aws", "provider=gc%zz", "limit=1&limit=%zz", "limit=0", "limit=99999999999999999999",
		"limit=5&cursor=abc", "a=b", "%zz=1", "provider=aws;status=active", "status=%", "&&&", "=x", "provider",
		"provider=g%63p", "provider=aws+", "limit=+5",
	} {
		f.Add(s)
	}
	allowed := []string{"provider", "status", "limit", "cursor"}
	f.Fuzz(func(t *testing.T, raw string) {
		q := newQuery(raw, allowed...)
		provider := q.oneOf("provider", "aws", "gcp", "azure")
		limit := q.limit()
		err := q.err()
		if err != nil {
			checkRefusal(t, err)
			return
		}
		// Accepted: the standard parser reads the same values, so no
		// parameter was dropped on the way (a filter that fails open).
		std, perr := url.ParseQuery(raw)
		if perr != nil && !strings.Contains(perr.Error(), "semicolon") {
			t.Fatalf("accepted %q, which url.ParseQuery refuses: %v", raw, perr)
		}
		if perr == nil {
			for k, vs := range std {
				if !slices.Contains(allowed, k) || len(vs) > 1 {
					t.Fatalf("accepted %q with parameter %q %v", raw, k, vs)
				}
			}
			if p := std.Get("provider"); p != string(provider) {
				t.Fatalf("provider %q, the standard parser reads %q", provider, p)
			}
		}
		if limit < 1 || limit > MaxLimit {
			t.Fatalf("limit %d out of range for %q", limit, raw)
		}
	})
}

func FuzzIfMatch(f *testing.F) {
	for _, s := range []string{`"3"`, `*`, `W/"3"`, `"3", "4"`, `3`, `"0"`, `""`, `"-1"`, `"99999999999999999999"`, ` "7" `, `*, "1"`, `w/"3"`, `"3.1765000000"`, `"3."`, `"3.x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("PATCH", "/x", nil)
		r.Header["If-Match"] = []string{header}
		v, err := ifMatch(r, true)
		if err != nil {
			if k := space.KindOf(err); k != space.KindMalformed && k != space.KindPreconditionFailed && k != space.KindPreconditionRequired {
				t.Fatalf("%q: kind %d: %v", header, k, err)
			}
			return
		}
		// RFC 9110 5.6.1.2: empty list elements are ignored.
		var tags []string
		for _, t := range strings.Split(header, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
		if len(tags) != 1 {
			t.Fatalf("%q (%d tags) accepted", header, len(tags))
		}
		h := tags[0]
		if strings.Contains(h, "W/") {
			t.Fatalf("weak tag %q matched", header)
		}
		if v == 0 {
			if h != "*" {
				t.Fatalf("%q read as any version", header)
			}
			return
		}
		// A read's tag names its probe time after the version.
		num, probed, dotted := strings.Cut(strings.Trim(h, `"`), ".")
		if _, err := strconv.ParseInt(probed, 10, 64); num != strconv.FormatInt(v, 10) || (dotted && err != nil) {
			t.Fatalf("%q read as version %d", header, v)
		}
	})
}

// FuzzRouting sends any method and path through the full middleware with an
// authenticator that refuses everyone: the answer is always a problem
// document, never a redirect or a 5xx.
func FuzzRouting(f *testing.F) {
	for _, p := range []string{"/spaces", "//spaces", "/./spaces", "/spaces/../cloud-accounts", "/spaces/x/status", "/nope", "/openapi.yaml", "/spaces/", "/%2e%2e/"} {
		f.Add("GET", p)
		f.Add("PATCH", p)
	}
	api := &API{Auth: failAuth{&space.Error{Kind: space.KindUnauthenticated, Reason: "invalid_token", Message: "no"}}, Log: slog.New(slog.DiscardHandler)}
	h := api.Handler()
	f.Fuzz(func(t *testing.T, method, path string) {
		u, err := url.Parse(path)
		if err != nil || !strings.HasPrefix(u.Path, "/") || method == "" || strings.ContainsAny(method, " \t\r\n/()<>@,;:\\\"[]?={}") || !utf8.ValidString(method) {
			return // not a request net/http would deliver
		}
		for _, c := range method {
			if c <= ' ' || c >= 0x7f {
				return
			}
		}
		r := &http.Request{Method: method, URL: u, Header: http.Header{}, Host: "x", RequestURI: path}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if method == "GET" && u.Path == "/openapi.yaml" {
			return
		}
		if rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("%s %q: status %d", method, path, rec.Code)
		}
		var p problem
		if rec.Header().Get("Content-Type") != "application/problem+json" || json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Status != rec.Code || p.Detail == "" {
			t.Fatalf("%s %q: not a problem document: %s", method, path, rec.Body)
		}
	})
}
