package tracehttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"spaces/shared/tracing"
	"spaces/shared/tracing/tracehttp"
)

type exported struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ SpanID string }
	Status      struct{ Code string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
}

func spans(t *testing.T, b *bytes.Buffer) map[string]exported {
	t.Helper()
	out := map[string]exported{}
	dec := json.NewDecoder(b)
	for dec.More() {
		var s exported
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		out[s.Name] = s
	}
	return out
}

// A request continues the caller's traceparent, its span takes the route's
// name and a 5xx marks it failed; a request sent to a cluster gets a client
// span under the caller's, and carries no trace header to it.
func TestServerAndClientSpans(t *testing.T) {
	var buf bytes.Buffer
	tr, err := tracing.New(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var sentHeader string
	cluster := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sentHeader = r.Header.Get("traceparent")
		w.WriteHeader(http.StatusOK)
	}))
	defer cluster.Close()
	client := &http.Client{Transport: tracehttp.Transport(http.DefaultTransport)}
	api := tracehttp.Handler(tr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tracing.NameSpan(r.Context(), "POST /spaces")
		req, _ := http.NewRequestWithContext(r.Context(), "GET", cluster.URL+"/version", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
		} else {
			resp.Body.Close()
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	req := httptest.NewRequestWithContext(context.Background(), "POST", "/spaces", nil)
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	api.ServeHTTP(httptest.NewRecorder(), req)

	got := spans(t, &buf)
	server, probe := got["POST /spaces"], got["GET /version"]
	if server.SpanContext.TraceID != "0af7651916cd43dd8448eb211c80319c" || server.Parent.SpanID != "b7ad6b7169203331" || server.Status.Code != "Error" {
		t.Errorf("server span %+v, want the caller's trace, under its span, failed", server)
	}
	if probe.SpanContext.TraceID != server.SpanContext.TraceID || probe.Parent.SpanID != server.SpanContext.SpanID {
		t.Errorf("client span %+v, want it under the server span %s", probe, server.SpanContext.SpanID)
	}
	if sentHeader != "" {
		t.Errorf("the cluster was sent traceparent %q", sentHeader)
	}
	// Without a span in the context the transport makes none and still works.
	buf.Reset()
	resp, err := client.Get(cluster.URL + "/version")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain request: %v %v", resp, err)
	}
	resp.Body.Close()
	if buf.Len() != 0 {
		t.Errorf("a request without a span exported %q", buf.String())
	}
}
