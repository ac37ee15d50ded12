package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"spaces/shared/awsclient"
	"spaces/shared/wiring/discovery"
)

// discoveryHandlers is how many invocations of the discovery function run
// at once locally (Lambda would start more instances).
const discoveryHandlers = 4

// startDiscovery runs the discovery function the way Lambda runs it: the
// function exists in the emulator's Lambda under its template name, and
// its handler takes invocations from the emulator's runtime API (the
// protocol lambda.Start speaks), in-process. The catalog's cloud questions
// therefore take the deployed path, an SDK Invoke. It returns the function's
// name once an Invoke reaches the handler.
func (st *Stack) startDiscovery(cfg Config, fn *discovery.Function) (string, error) {
	name := cfg.Names("DiscoveryFunction")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	st.stopDiscovery = func() {
		cancel()
		wg.Wait()
	}
	client := awsclient.Lambda(st.AWS, st.EmulatorURL)
	_, err := client.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Role: aws.String("arn:aws:iam::000000000000:role/DiscoveryFunctionRole"),
		Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Architectures: []lambdatypes.Architecture{lambdatypes.ArchitectureArm64},
		Code:          &lambdatypes.FunctionCode{ZipFile: []byte("local: served in-process")},
		Timeout:       aws.Int32(10),
	})
	var exists *lambdatypes.ResourceConflictException
	if err != nil && !errors.As(err, &exists) { // a persisted emulator keeps it
		return "", fmt.Errorf("create the discovery function: %w", err)
	}
	runtimeAPI := st.EmulatorURL + "/_runtime/" + name + "/2018-06-01/runtime/invocation/"
	handle := fn.Lambda(cfg.Tracing)
	for range discoveryHandlers {
		wg.Go(func() { serveRuntime(ctx, runtimeAPI, handle, cfg) })
	}
	// Invoke answers "no backend" until a handler has polled once; a
	// request the handler refuses proves it is there.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(name), Payload: []byte(`{"op":"local.ready"}`)})
		if err == nil {
			return name, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the discovery function does not answer: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveRuntime is one Lambda instance's loop: take the next invocation,
// run it, post its result or error.
func serveRuntime(ctx context.Context, api string, handle func(context.Context, json.RawMessage) (any, error), cfg Config) {
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api+"next", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				cfg.Log.Warn("discovery runtime: next", "error", err.Error())
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		payload, _ := io.ReadAll(res.Body)
		res.Body.Close()
		id := res.Header.Get("Lambda-Runtime-Aws-Request-Id")
		if res.StatusCode != http.StatusOK || id == "" {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		ictx, cancel := ctx, context.CancelFunc(func() {})
		if ms, err := strconv.ParseInt(res.Header.Get("Lambda-Runtime-Deadline-Ms"), 10, 64); err == nil {
			ictx, cancel = context.WithDeadline(ctx, time.UnixMilli(ms))
		}
		out, err := handle(ictx, payload)
		cancel()
		path := id + "/response"
		var body []byte
		if err != nil {
			path = id + "/error"
			body, _ = json.Marshal(map[string]string{"errorMessage": err.Error(), "errorType": "HandlerError"})
		} else {
			body, _ = json.Marshal(out)
		}
		post, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+path, bytes.NewReader(body))
		if res, err := http.DefaultClient.Do(post); err == nil {
			res.Body.Close()
		}
	}
}
