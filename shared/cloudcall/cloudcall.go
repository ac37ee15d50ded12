// Package cloudcall carries the catalog API's two questions for a cloud to
// the discovery function, over a synchronous Lambda Invoke: does the cluster
// a registration names exist in its account (space.ClusterChecker), and
// does an account's cloud trust the org (space.AccountVerifier). The
// catalog then links no cloud SDK and no client-go; the answers, the
// problems included (422 ClusterNotFound, AccessDenied, ...), are the
// discovery function's minter's, unchanged.
//
// Client is the catalog's side; Handler is the discovery function's. The
// discovery function tells a Request from an API Gateway event by its Op.
package cloudcall

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"spaces/shared/budget"
	"spaces/shared/space"
	"spaces/shared/tracing"
)

// The questions a Request asks.
const (
	OpCheckCluster  = "spaces.check-cluster"
	OpVerifyAccount = "spaces.verify-account"
)

// Request is the Invoke payload.
type Request struct {
	Op      string             `json:"op"`
	Account space.CloudAccount `json:"account"`
	// Legacy is the account's flag, which its JSON form leaves out.
	Legacy bool         `json:"legacy,omitempty"`
	Space  *space.Space `json:"space,omitempty"`
	// Deadline is when the caller stops waiting for the answer, less the
	// time the answer takes back (Unix milliseconds; 0: none): the
	// discovery function's cloud call ends by then (shared/budget).
	Deadline int64 `json:"deadline_ms,omitempty"`
	// Trace is the caller's trace (tracing.Carrier): the discovery
	// function's work on the request continues it.
	Trace map[string]string `json:"trace,omitempty"`
}

// Response is the Invoke result: no Error means yes. Cluster is what the
// cloud said of the cluster a check-cluster request names.
type Response struct {
	Error   *Problem            `json:"error,omitempty"`
	Cluster *space.ClusterFacts `json:"cluster,omitempty"`
}

// Problem is a space.Error on the wire (its internal cause stays in the
// discovery function's log).
type Problem struct {
	Kind    space.Kind         `json:"kind"`
	Reason  string             `json:"reason,omitempty"`
	Message string             `json:"message"`
	Fields  []space.FieldError `json:"fields,omitempty"`
}

// Invoker is the part of the Lambda client Client uses.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Client asks the discovery function (Function: its name or ARN).
type Client struct {
	Lambda   Invoker
	Function string
}

// CheckCluster implements space.ClusterChecker.
func (c Client) CheckCluster(ctx context.Context, acct space.CloudAccount, s space.Space) (space.ClusterFacts, error) {
	res, err := c.call(ctx, Request{Op: OpCheckCluster, Account: acct, Legacy: acct.Legacy, Space: &s})
	if err != nil || res.Cluster == nil {
		return space.ClusterFacts{}, err
	}
	return *res.Cluster, nil
}

// VerifyAccount implements space.AccountVerifier.
func (c Client) VerifyAccount(ctx context.Context, acct space.CloudAccount) error {
	_, err := c.call(ctx, Request{Op: OpVerifyAccount, Account: acct, Legacy: acct.Legacy})
	return err
}

func (c Client) call(ctx context.Context, req Request) (Response, error) {
	if d, ok := ctx.Deadline(); ok {
		req.Deadline = d.Add(-budget.InvokeReserve).UnixMilli()
	}
	req.Trace = tracing.Carrier(ctx)
	payload, err := json.Marshal(req)
	if err != nil {
		return Response{}, &space.Error{Kind: space.KindInternal, Message: "the cloud check could not be encoded", Err: err}
	}
	out, err := c.Lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: &c.Function, Payload: payload})
	if err != nil {
		return Response{}, unavailable(err)
	}
	if out.FunctionError != nil {
		// The function crashed or timed out: the cloud did not answer.
		return Response{}, unavailable(errors.New(*out.FunctionError + ": " + string(out.Payload)))
	}
	var res Response
	if err := json.Unmarshal(out.Payload, &res); err != nil {
		return Response{}, unavailable(err)
	}
	if res.Error == nil {
		return res, nil
	}
	p := res.Error
	return Response{}, &space.Error{Kind: p.Kind, Reason: p.Reason, Message: p.Message, Fields: p.Fields}
}

func unavailable(err error) error {
	return &space.Error{Kind: space.KindUnavailable, Reason: space.ReasonCloudUnavailable,
		Message: "the cloud could not be asked: try again", Err: err}
}

// Handler answers Requests with the discovery function's minter.
type Handler struct {
	Clusters space.ClusterChecker
	Verifier space.AccountVerifier
}

// Handle answers one Request. Only a malformed request is an error (the
// Invoke then reports a function error); the cloud's answers are Responses.
func (h Handler) Handle(ctx context.Context, req Request) (Response, error) {
	ctx, end := tracing.Continue(ctx, req.Op, req.Trace)
	res, err := h.answer(ctx, req)
	switch {
	case err != nil:
		end(err)
	case res.Error != nil:
		end(errors.New(res.Error.Message))
	default:
		end(nil)
	}
	return res, err
}

func (h Handler) answer(ctx context.Context, req Request) (Response, error) {
	req.Account.Legacy = req.Legacy
	if req.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = budget.Until(ctx, time.UnixMilli(req.Deadline))
		defer cancel()
	}
	var (
		err   error
		facts space.ClusterFacts
	)
	switch {
	case req.Op == OpCheckCluster && req.Space != nil:
		facts, err = h.Clusters.CheckCluster(ctx, req.Account, *req.Space)
	case req.Op == OpVerifyAccount:
		err = h.Verifier.VerifyAccount(ctx, req.Account)
	default:
		return Response{}, errors.New("cloudcall: unknown request " + req.Op)
	}
	if err == nil {
		if facts == (space.ClusterFacts{}) {
			return Response{}, nil
		}
		return Response{Cluster: &facts}, nil
	}
	var de *space.Error
	if !errors.As(err, &de) {
		de = &space.Error{Kind: space.KindInternal, Message: "the cloud check failed"}
	}
	return Response{Error: &Problem{Kind: de.Kind, Reason: de.Reason, Message: de.Message, Fields: de.Fields}}, nil
}
