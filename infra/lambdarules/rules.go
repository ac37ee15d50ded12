// Package lambdarules is a Lambda invocation under template.yaml's rules,
// for the local stack: what Lambda itself enforces around a handler, and
// the emulator does not. It reads each function's settings from the
// template (Read) and is the one place the local stack's wiring runs every
// function's invocations through:
//
//   - Timeout (Run): an invocation past its function's Timeout is over: its
//     context is cancelled, whatever it answers later is discarded, and the
//     caller gets Lambda's answer, the function error "Task timed out after
//     N.NN seconds" (an SQS batch fails whole; behind the HTTP API the
//     gateway answers 500, Gateway; a function URL 502, FunctionURL).
//   - Reserved concurrency (Run, concurrency.go): one pool of executions
//     per function, shared by all its triggers, so a flood at one (its
//     URL) throttles the others (an authorizer, a queue); functions the
//     template separates share nothing.
//   - Function URLs (FunctionURL): no routes of their own (every path is
//     the function's to answer), the function's own Timeout, and the
//     throttle its reserved concurrency sets: at most that many requests
//     in flight (the function's executions, taken by any trigger) and 10
//     times that many a second, 429 beyond.
//   - Recursive loop detection (SQS, TraceHeader): the chain of invocations
//     an SQS message carries, counted as Lambda counts it in the trace
//     header's lineage; a message that would invoke a function a 17th time
//     in its chain is dropped, unless the function's RecursiveLoop is Allow.
//   - The SQS event source mapping (Poller, sqssource.go): pollers that
//     long-poll, gather batches for the event's batching window, invoke,
//     and delete what the function acknowledged, as many and scaling as
//     Lambda's, so that their requests can be counted.
//   - Asynchronous invocation (Async): what EventBridge Scheduler's
//     invocations of a function get: retries and maximum event age from
//     the function's EventInvokeConfig (else Lambda's defaults, 2 retries
//     and 6 hours), and the failed event's record sent to its on-failure
//     destination.
//
// Each rule's comment cites the AWS documentation page it follows.
package lambdarules

import (
	"encoding/json"
	"fmt"
	"time"

	"spaces/infra/emulator"
)

// Values of RecursiveLoop.
const (
	Terminate = "Terminate"
	Allow     = "Allow"
)

// Lambda's defaults where the template says nothing.
const (
	// DefaultTimeout: "The default timeout is 3 seconds" (AWS::Lambda::Function
	// Timeout, and https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html);
	// the template's Globals normally set one.
	DefaultTimeout = 3 * time.Second
	// DefaultMemoryMB: MemorySize "Default: 128"
	// (https://docs.aws.amazon.com/lambda/latest/api/API_CreateFunction.html).
	DefaultMemoryMB = 128
	// DefaultAsyncRetries and DefaultMaxEventAge: "Lambda retries function
	// errors twice", and keeps an event up to 6 hours
	// (https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html).
	DefaultAsyncRetries = 2
	DefaultMaxEventAge  = 6 * time.Hour
)

// Function is one function's rules, as the template declares them.
type Function struct {
	// ID is the function's logical id in the template.
	ID      string
	Timeout time.Duration
	// MemoryMB is its MemorySize (the function's, else the Globals', else
	// Lambda's default), what its duration is billed at.
	MemoryMB int
	// RecursiveLoop is Terminate (Lambda's default) or Allow.
	RecursiveLoop string
	Async         Async
	// Sources are its SQS events by name (its event source mappings).
	Sources map[string]SQSSource
	// URL is its function URL (nil: none).
	URL *URL
	// ReservedConcurrency is its ReservedConcurrentExecutions (0: none
	// reserved, no limit modelled).
	ReservedConcurrency int
	// executions is the pool of its reserved executions, one per function
	// and shared by every copy of f (nil: none reserved): every trigger's
	// invocation (its URL, a synchronous Handler such as IoT Core's
	// authorizer, its SQS event source, asynchronous invocation) holds one
	// while it runs (Run).
	executions *executions
	// meter counts its invocations (Usage), shared like executions.
	meter *meter
}

// Async is a function's EventInvokeConfig.
type Async struct {
	// MaxRetries is MaximumRetryAttempts (0-2).
	MaxRetries int
	// MaxEventAge is MaximumEventAgeInSeconds (60 s - 6 h).
	MaxEventAge time.Duration
	// OnFailure is the logical id of the SQS queue the record of a failed
	// event goes to ("": none).
	OnFailure string
}

// Functions are the template's functions by logical id.
type Functions map[string]Function

// Get returns the function id; the local stack runs only functions the
// template declares, so an unknown id is a wiring mistake.
func (fs Functions) Get(id string) Function {
	f, ok := fs[id]
	if !ok {
		panic("lambdarules: the template declares no function " + id)
	}
	return f
}

// Read reads every AWS::Serverless::Function of the template: Timeout
// (the function's, else the Globals', else Lambda's default),
// RecursiveLoop, EventInvokeConfig, its SQS events and its function URL.
func Read(template []byte) (Functions, error) {
	js, err := emulator.RawJSON(template)
	if err != nil {
		return nil, err
	}
	type props struct {
		Timeout                      *float64
		MemorySize                   *int
		RecursiveLoop                string
		ReservedConcurrentExecutions any
		FunctionUrlConfig            *struct{ AuthType, InvokeMode string }
		Events                       map[string]struct {
			Type       string
			Properties struct {
				Queue                          any
				BatchSize                      *int
				MaximumBatchingWindowInSeconds *int
				ScalingConfig                  struct{ MaximumConcurrency int }
			}
		}
		EventInvokeConfig *struct {
			MaximumRetryAttempts     *int
			MaximumEventAgeInSeconds *int
			DestinationConfig        struct {
				OnFailure struct {
					Type        string
					Destination any
				}
			}
		}
	}
	var doc struct {
		Globals struct {
			Function props
		}
		Resources map[string]struct {
			Type       string
			Properties props
		}
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("lambdarules: %w", err)
	}
	fs := Functions{}
	for id, r := range doc.Resources {
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		p := r.Properties
		f := Function{ID: id, Timeout: DefaultTimeout, RecursiveLoop: Terminate, MemoryMB: DefaultMemoryMB,
			Async: Async{MaxRetries: DefaultAsyncRetries, MaxEventAge: DefaultMaxEventAge}, meter: &meter{}}
		switch {
		case p.MemorySize != nil:
			f.MemoryMB = *p.MemorySize
		case doc.Globals.Function.MemorySize != nil:
			f.MemoryMB = *doc.Globals.Function.MemorySize
		}
		switch {
		case p.Timeout != nil:
			f.Timeout = time.Duration(*p.Timeout * float64(time.Second))
		case doc.Globals.Function.Timeout != nil:
			f.Timeout = time.Duration(*doc.Globals.Function.Timeout * float64(time.Second))
		}
		switch p.RecursiveLoop {
		case "":
		case Allow, Terminate:
			f.RecursiveLoop = p.RecursiveLoop
		default:
			return nil, fmt.Errorf("lambdarules: %s: RecursiveLoop %q is neither Allow nor Terminate", id, p.RecursiveLoop)
		}
		if c := p.EventInvokeConfig; c != nil {
			if c.MaximumRetryAttempts != nil {
				f.Async.MaxRetries = *c.MaximumRetryAttempts
			}
			if c.MaximumEventAgeInSeconds != nil {
				f.Async.MaxEventAge = time.Duration(*c.MaximumEventAgeInSeconds) * time.Second
			}
			if d := c.DestinationConfig.OnFailure; d.Type != "" {
				if d.Type != "SQS" {
					return nil, fmt.Errorf("lambdarules: %s: on-failure destination of type %s: only SQS is modelled", id, d.Type)
				}
				if f.Async.OnFailure = getAttArn(d.Destination); f.Async.OnFailure == "" {
					return nil, fmt.Errorf("lambdarules: %s: the on-failure destination must be !GetAtt <queue>.Arn", id)
				}
			}
		}
		if c := p.FunctionUrlConfig; c != nil {
			// AWS_IAM (SigV4-signed callers) and RESPONSE_STREAM are not
			// modelled: the local stack would serve them wrongly.
			if c.AuthType != "NONE" || (c.InvokeMode != "" && c.InvokeMode != "BUFFERED") {
				return nil, fmt.Errorf("lambdarules: %s: FunctionUrlConfig %+v: only AuthType NONE, BUFFERED is modelled", id, *c)
			}
			f.URL = &URL{AuthType: c.AuthType}
		}
		for name, ev := range p.Events {
			if ev.Type != "SQS" {
				continue
			}
			src := SQSSource{BatchSize: 10, MaximumConcurrency: ev.Properties.ScalingConfig.MaximumConcurrency}
			if src.Queue = getAttArn(ev.Properties.Queue); src.Queue == "" {
				return nil, fmt.Errorf("lambdarules: %s.%s: the queue must be !GetAtt <queue>.Arn", id, name)
			}
			if b := ev.Properties.BatchSize; b != nil {
				src.BatchSize = *b
			}
			if w := ev.Properties.MaximumBatchingWindowInSeconds; w != nil {
				src.Window = time.Duration(*w) * time.Second
			}
			if f.Sources == nil {
				f.Sources = map[string]SQSSource{}
			}
			f.Sources[name] = src
		}
		// A number; a parameter's (!Ref) is not resolved here: no limit.
		if n, ok := p.ReservedConcurrentExecutions.(float64); ok && n > 0 {
			f.ReservedConcurrency = int(n)
			f.executions = &executions{limit: int(n)}
		}
		fs[id] = f
	}
	return fs, nil
}

// getAttArn is X of {"Fn::GetAtt": [X, "Arn"]} or "X.Arn".
func getAttArn(v any) string {
	m, _ := v.(map[string]any)
	switch g := m["Fn::GetAtt"].(type) {
	case []any:
		if len(g) == 2 && g[1] == "Arn" {
			s, _ := g[0].(string)
			return s
		}
	case string:
		if len(g) > 4 && g[len(g)-4:] == ".Arn" {
			return g[:len(g)-4]
		}
	}
	return ""
}
