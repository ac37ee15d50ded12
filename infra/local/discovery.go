package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"spaces/infra/lambdarules"
	"spaces/shared/awsclient"
	"spaces/shared/wiring/discovery"
)

// discoveryHandlers is how many invocations of the discovery function run
// at once locally (Lambda would start more instances).
const discoveryHandlers = 4

// startDiscovery builds the discovery function, the cluster side, its own
// function as deployed. With a minter it runs the function the way Lambda
// runs it: the function exists in the emulator's Lambda under its template
// name, and its handler takes invocations from the emulator's runtime API
// (the protocol lambda.Start speaks), in-process. The catalog's cloud
// questions therefore take the deployed path, an SDK Invoke. It returns
// once an Invoke reaches the handler. Without a minter no cloud is
// reachable and the catalog asks none.
func (st *starting) startDiscovery(cfg *Config) (func(), error) {
	st.disc = discovery.New(st.aws, discovery.Settings{Common: st.common(cfg), Wakes: st.wakes()}, discovery.Options{Auth: st.verifier, Minter: cfg.Minter, Log: cfg.Log})
	if cfg.Minter == nil {
		return nil, nil
	}
	name := cfg.Names("DiscoveryFunction")
	rules := st.Functions.Get("DiscoveryFunction")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := func() {
		cancel()
		wg.Wait()
	}
	client := awsclient.Lambda(st.AWS, st.EmulatorURL)
	_, err := client.CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Role: aws.String("arn:aws:iam::000000000000:role/DiscoveryFunctionRole"),
		Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Architectures: []lambdatypes.Architecture{lambdatypes.ArchitectureArm64},
		Code:          &lambdatypes.FunctionCode{ZipFile: []byte("local: served in-process")},
		Timeout:       aws.Int32(int32(rules.Timeout / time.Second)),
	})
	var exists *lambdatypes.ResourceConflictException
	if err != nil && !errors.As(err, &exists) { // a persisted emulator keeps it
		stop()
		return nil, fmt.Errorf("create the discovery function: %w", err)
	}
	runtimeAPI := st.EmulatorURL + "/_runtime/" + name + "/2018-06-01/runtime/invocation/"
	handle := st.disc.Lambda(cfg.Tracing)
	for range discoveryHandlers {
		wg.Go(func() { serveRuntime(ctx, runtimeAPI, rules, handle, *cfg) })
	}
	// Invoke answers "no backend" until a handler has polled once; a
	// request the handler refuses proves it is there.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := client.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(name), Payload: []byte(`{"op":"local.ready"}`)})
		if err == nil {
			st.discoveryFunction = name
			return stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("the discovery function does not answer: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveRuntime is one Lambda instance's loop: take the next invocation,
// run it under the function's rules (its Timeout: a timed-out invocation
// answers Lambda's "Task timed out" function error), post its result or
// error.
func serveRuntime(ctx context.Context, api string, rules lambdarules.Function, handle func(context.Context, json.RawMessage) (any, error), cfg Config) {
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
		out, err := lambdarules.Run(ctx, rules, lambdarules.TraceHeader(res.Header.Get("Lambda-Runtime-Trace-Id")).Next(rules.ID),
			func(ctx context.Context) (any, error) { return handle(ctx, payload) })
		path := id + "/response"
		var body []byte
		if err != nil {
			path = id + "/error"
			kind := "HandlerError"
			if lambdarules.IsTimeout(err) {
				kind = "Sandbox.Timedout"
			}
			body, _ = json.Marshal(map[string]string{"errorMessage": err.Error(), "errorType": kind})
		} else {
			body, _ = json.Marshal(out)
		}
		post, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+path, bytes.NewReader(body))
		if res, err := http.DefaultClient.Do(post); err == nil {
			res.Body.Close()
		}
	}
}
