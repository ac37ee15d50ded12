// Package iamcheck proves each function's IAM role in template.yaml from
// the AWS requests the function makes, since the emulator checks no IAM:
// without it a new SDK call passes every local test and fails only in AWS.
//
// Recording. A Recorder is SDK middleware (APIOption, added to the local
// stack's aws.Config) and an HTTP transport (IoTData, for the agents'
// wakes, which are signed HTTP requests, not an SDK client's). It records
// each request made with a function's execution role as a Call: the
// function's logical id, the IAM action the request needs and the ARN of
// the resource it targets, named by logical id (SpacesTable, not a test's
// prefixed table), as if the stack were deployed in the emulator's region
// and account. Whose role a request is made with is the context's
// (lambdarules.FunctionOf): every invocation of the local stack runs under
// lambdarules, which names its function, and so do the requests Lambda
// makes with the role (an SQS event source mapping's receives and deletes,
// a stream mapping's reads, an on-failure destination's send). A request
// made with no function in its context (a test's own reads, the stack's
// setup) is no function's and is not recorded. Without a Recorder nothing
// is added to any client.
//
// The actions are IAM's, not the API's: a DynamoDB TransactWriteItems
// needs PutItem, UpdateItem, DeleteItem or ConditionCheckItem on each
// item's table (DynamoDB has no TransactWriteItems action), a Query of an
// index needs Query on the index's ARN (table/T/index/I), an SQS batch
// needs the single action (DeleteMessageBatch: sqs:DeleteMessage), a
// PutEvents needs events:PutEvents on each entry's bus, a stream's
// GetRecords needs the stream's ARN, which its shard iterator stands for.
// An Invoke that names no alias is recorded as an Invoke of the alias the
// template's Globals publish: every caller invokes the alias when
// deployed, and the emulator has none. An operation this package does not
// model is recorded with no resource, which no grant allows.
//
// Checking. Read resolves each function's role (an AWS::IAM::Role of the
// template, its inline statements' !GetAtt, !Ref and !Sub resources) into
// the same names. Denied lists the calls a role does not allow; Unused
// lists every grant (action and resource of a statement) that no call
// uses and no justification excuses. A justification is a comment above
// the statement's "- Sid:" line,
//
//	# iam: sqs:GetQueueAttributes: Lambda's event source mapping reads the
//	# queue's attributes; the local poller does not.
//
// naming the statement's actions that no local call makes and why (the
// reason may go on over the next comment lines). An action it names must
// be one of the statement's and must be used by no recorded call on any
// of the statement's resources, so that the comment stays true.
//
// The record. infra/local's tests run every function, over many tests
// and in more than one process (make test splits them); each run checks
// that every call it recorded is granted and is in the committed record,
// testdata/calls.txt, the union of the calls those tests make (go test
// ./infra/local -iam.update adds a run's calls to it; a call no test makes
// any more is removed by hand, or by deleting the file and updating it with
// a run of the whole package). This package's tests check the record
// against template.yaml in both directions, without starting anything:
// every recorded call is granted, and every grant is recorded or
// justified.
package iamcheck

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"spaces/infra/emulator"
	"spaces/infra/lambdarules"
)

// Call is one request a function makes with its role, as IAM authorizes
// it: Action on Resource (an ARN; "" when the operation is not modelled).
type Call struct {
	Function, Action, Resource string
}

func (c Call) String() string { return c.Function + " " + c.Action + " " + c.Resource }

// Local is how one local stack names the template's resources.
type Local struct {
	// Names maps a physical name (a table's, queue's, bus's or function's)
	// to its logical id in the template.
	Names map[string]string
	// Alias is the alias an unqualified Invoke is recorded as invoking
	// (the template's Globals.Function.AutoPublishAlias; "": none).
	Alias string
}

func (l Local) logical(name string) string {
	if id, ok := l.Names[name]; ok {
		return id
	}
	return name
}

// Recorder collects Calls. Its zero value is not usable; use NewRecorder.
type Recorder struct {
	mu    sync.Mutex
	calls map[Call]bool
	// iterators are the shard iterators handed out, each to the stream it
	// reads: GetRecords names only an iterator.
	iterators map[string]string
}

// NewRecorder returns a Recorder that has recorded nothing.
func NewRecorder() *Recorder {
	return &Recorder{calls: map[Call]bool{}, iterators: map[string]string{}}
}

// Calls returns the calls recorded, sorted, each once.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Call, 0, len(r.calls))
	for c := range r.calls {
		out = append(out, c)
	}
	Sort(out)
	return out
}

// Sort sorts calls by function, action and resource.
func Sort(calls []Call) {
	slices.SortFunc(calls, func(a, b Call) int { return strings.Compare(a.String(), b.String()) })
}

func (r *Recorder) add(fn string, reqs []request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range reqs {
		r.calls[Call{Function: fn, Action: q.action, Resource: q.resource}] = true
	}
}

// APIOption is an SDK option (aws.Config.APIOptions) that records every
// request made within a function's context through the clients built from
// that configuration, named as l names them.
func (r *Recorder) APIOption(l Local) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("iamcheck",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if fn := lambdarules.FunctionOf(ctx); fn != "" {
					r.add(fn, r.requests(l, awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), in.Parameters, out.Result))
				}
				return out, md, err
			}), middleware.After)
	}
}

// IoTData wraps next, the transport of IoT Core's data plane
// (shared/agentwake), recording each request made within a function's
// context: Publish (POST /topics/<topic>) as iot:Publish on the topic,
// DeleteConnection (DELETE /connections/<client id>) as iot:DeleteConnection
// on the client. Any other request is recorded as iot:Publish with no
// resource, which Denied reports as not modelled. A space id in the topic
// or client id is recorded as SpaceIDMark: each test's spaces are new, and
// the record names each call once.
func (r *Recorder) IoTData(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if fn := lambdarules.FunctionOf(req.Context()); fn != "" {
			q := request{action: "iot:Publish"}
			path := req.URL.EscapedPath()
			if topic, ok := strings.CutPrefix(path, "/topics/"); ok && req.Method == http.MethodPost {
				if t, err := url.PathUnescape(topic); err == nil {
					q.resource = arn("iot", "topic/"+spaceIDs.ReplaceAllString(t, SpaceIDMark))
				}
			} else if client, ok := strings.CutPrefix(path, "/connections/"); ok && req.Method == http.MethodDelete {
				q.action = "iot:DeleteConnection"
				if c, err := url.PathUnescape(client); err == nil {
					q.resource = arn("iot", "client/"+spaceIDs.ReplaceAllString(c, SpaceIDMark))
				}
			}
			r.add(fn, []request{q})
		}
		return next.RoundTrip(req)
	})
}

// SpaceIDMark stands for the space id in an IoT resource's name.
const SpaceIDMark = "{space_id}"

var spaceIDs = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// arn is the ARN of resource in service, in the emulator's region and
// account.
func arn(service, resource string) string {
	return "arn:aws:" + service + ":" + emulator.Region + ":" + emulator.AccountID + ":" + resource
}

// ReadRecord reads a record written by WriteRecord (none yet: empty).
func ReadRecord(path string) ([]Call, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Call
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"function action resource\", got %q", path, n, line)
		}
		out = append(out, Call{Function: f[0], Action: f[1], Resource: f[2]})
	}
	return out, sc.Err()
}

// WriteRecord writes calls to path, sorted, one a line.
func WriteRecord(path string, calls []Call) error {
	calls = slices.Clone(calls)
	Sort(calls)
	calls = slices.Compact(calls)
	var b strings.Builder
	b.WriteString("# The AWS requests infra/local's tests make with each function's role\n")
	b.WriteString("# (package infra/iamcheck): function, IAM action, resource. Updated by\n")
	b.WriteString("# go test ./infra/local -iam.update (with the emulator's overlay modfile).\n")
	for _, c := range calls {
		b.WriteString(c.String() + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// ForStack is a Local for a stack of template with no names yet (the
// caller adds its physical names) and the alias template's Globals
// publish.
func ForStack(template []byte) (Local, error) {
	js, err := emulator.RawJSON(template)
	if err != nil {
		return Local{}, err
	}
	var doc tmpl
	if err := json.Unmarshal(js, &doc); err != nil {
		return Local{}, fmt.Errorf("iamcheck: %w", err)
	}
	return Local{Names: map[string]string{}, Alias: doc.Globals.Function.AutoPublishAlias}, nil
}
