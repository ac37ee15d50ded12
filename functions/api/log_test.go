package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/config"
	"spaces/shared/space"
	"spaces/shared/tracing"
	"spaces/shared/wiring/api"
	"spaces/shared/wiring/parts"
)

// TestWriteLogsCarryRequestIdsAndCaller sends a write (POST
// /cloud-accounts, the sample event) through the function's own handler
// as Lambda invokes it, with a Lambda request id and an X-Ray trace header
// in the context, and reads what it logged and traced: every line of the
// request carries the Lambda request id, the gateway's request id, the
// caller's sub and org and the X-Ray trace id, and the request's span and
// its DynamoDB write belong to that trace.
func TestWriteLogsCarryRequestIdsAndCaller(t *testing.T) {
	env := emulatortest.Start(t)
	s := api.Settings{Common: parts.Common{Table: env.Name(t, "SpacesTable"), StaleAfter: space.DefaultStaleAfter},
		CursorSecret: "test-secret-test-secret-test-secret",
		ProbeQueue:   env.Resources["ProbeQueue"].URL, RevisionsQueue: env.Resources["RevisionsQueue"].URL}
	var logs, spans bytes.Buffer
	tr, err := tracing.New(&spans)
	if err != nil {
		t.Fatal(err)
	}
	fn := &config.Function{Log: slog.New(tracing.LogHandler(slog.NewJSONHandler(&logs, nil))), Tracing: tr, Env: config.FromOS()}
	h, err := handler(parts.AWS{Config: env.Config, Endpoint: env.Endpoint}, s, fn)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../events/api/create-cloud-account.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	ev.RequestContext.RequestID = "gw-req-7"
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "lambda-req-7"})
	// What aws-lambda-go puts in the context under Active tracing.
	//lint:ignore SA1029 aws-lambda-go's own key for the X-Ray header.
	ctx = context.WithValue(ctx, "x-amzn-trace-id", "Root=1-6a1b2c3d-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=1")
	const traceID = "6a1b2c3d0123456789abcdef01234567"

	res, err := serve(h, fn.Tracing)(ctx, ev)
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("POST /cloud-accounts: %d %s %v", res.StatusCode, res.Body, err)
	}

	var lines []map[string]any
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		t.Fatal("the request logged nothing")
	}
	sawAccess := false
	for _, l := range lines {
		want := map[string]any{"lambda_request_id": "lambda-req-7", "gateway_request_id": "gw-req-7",
			"sub": "user-1", "org_id": "acme", "trace_id": traceID}
		for k, v := range want {
			if l[k] != v {
				t.Errorf("line %v: %s = %v, want %v", l, k, l[k], v)
			}
		}
		if l["msg"] == "request" && l["route"] == "POST /cloud-accounts" && l["status"] == 201.0 {
			sawAccess = true
		}
	}
	if !sawAccess {
		t.Errorf("no access line for the write in %v", lines)
	}

	names := map[string]string{} // span name -> trace id
	dec := json.NewDecoder(&spans)
	for dec.More() {
		var sp struct {
			Name        string
			SpanContext struct{ TraceID string }
		}
		if err := dec.Decode(&sp); err != nil {
			t.Fatal(err)
		}
		names[sp.Name] = sp.SpanContext.TraceID
	}
	for _, name := range []string{"api", "POST /cloud-accounts", "DynamoDB.PutItem"} {
		if got, ok := names[name]; !ok || got != traceID {
			t.Errorf("span %q: trace %q (present %v), want %s; spans: %v", name, got, ok, traceID, names)
		}
	}
	if strings.Contains(spans.String(), "user-1") {
		t.Error("a span carries the caller's sub; spans are not where callers are recorded")
	}
}
