package cloudcall

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"spaces/shared/space"
)

// checker answers a check with facts, or with err.
type checker struct {
	facts space.ClusterFacts
	err   error
}

func (c checker) CheckCluster(context.Context, space.CloudAccount, space.Space) (space.ClusterFacts, error) {
	return c.facts, c.err
}

func (c checker) VerifyAccount(context.Context, space.CloudAccount) error { return c.err }

// direct invokes a Handler in process, through the payload's JSON as the
// Lambda Invoke carries it.
type direct struct{ h Handler }

func (d direct) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	var req Request
	if err := json.Unmarshal(in.Payload, &req); err != nil {
		return nil, err
	}
	res, err := d.h.Handle(ctx, req)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	return &lambda.InvokeOutput{Payload: b}, err
}

// The cloud's facts about a cluster cross the Invoke; a refusal carries
// none.
func TestCheckClusterCarriesFacts(t *testing.T) {
	want := space.ClusterFacts{Location: "westeurope", KubernetesVersion: "1.31.2"}
	refused := &space.Error{Kind: space.KindInvalid, Reason: space.ReasonClusterNotFound, Message: "no such cluster"}
	for _, tc := range []struct {
		name  string
		cloud checker
		want  space.ClusterFacts
		err   string
	}{
		{"found", checker{facts: want}, want, ""},
		{"found, the cloud said nothing of it", checker{}, space.ClusterFacts{}, ""},
		{"not found", checker{facts: want, err: refused}, space.ClusterFacts{}, space.ReasonClusterNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Client{Lambda: direct{Handler{Clusters: tc.cloud, Verifier: tc.cloud}}, Function: "discovery"}
			got, err := c.CheckCluster(t.Context(), space.CloudAccount{}, space.Space{})
			if got != tc.want {
				t.Errorf("facts %+v, want %+v", got, tc.want)
			}
			var de *space.Error
			if tc.err == "" && err != nil || tc.err != "" && (!errors.As(err, &de) || de.Reason != tc.err) {
				t.Errorf("error %v, want reason %q", err, tc.err)
			}
		})
	}
}
