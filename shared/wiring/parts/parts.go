// Package parts holds what every assembly of a workflow shares: where AWS
// is (AWS, with the table and queue adapters), the settings every function
// reads, the bridges from the use cases' queue ports to SQS, and who the
// customers' clouds are told to trust. The catalog API (wiring/api) is
// built from these alone: shared/wiring, which builds the workflows from
// them too, also links EventBridge (they publish), whose SDK client's
// package init would cost every cold start of the API.
package parts

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces/shared/agentwake"
	"spaces/shared/awsclient"
	"spaces/shared/config"
	"spaces/shared/dynamostore"
	"spaces/shared/kmsseal"
	"spaces/shared/kmssign"
	"spaces/shared/probing"
	"spaces/shared/provisioning"
	"spaces/shared/revisions"
	"spaces/shared/space"
	"spaces/shared/sqsqueue"
	"spaces/shared/webhooks"
)

// AWS is where a workflow finds AWS: the SDK configuration and, locally,
// the emulator's endpoint ("" in AWS).
type AWS struct {
	Config   aws.Config
	Endpoint string
}

// Store is the spaces table.
func (a AWS) Store(table string, opts ...dynamostore.Option) *dynamostore.Store {
	return dynamostore.New(awsclient.DynamoDB(a.Config, a.Endpoint), table, opts...)
}

// Sealer seals webhook secrets with the KMS key keyID ("": none, and the
// webhook routes answer 503).
func (a AWS) Sealer(keyID string) []dynamostore.Option {
	if keyID == "" {
		return nil
	}
	return []dynamostore.Option{dynamostore.WithSealer(kmsseal.Sealer{KMS: awsclient.KMS(a.Config, a.Endpoint), KeyID: keyID})}
}

// TokenSigner signs agents' presence tokens with the KMS key keyID (nil
// for "": the authorizer does not sign).
func (a AWS) TokenSigner(keyID string) space.TokenSigner {
	if keyID == "" {
		return nil
	}
	return kmssign.Signer{KMS: awsclient.KMS(a.Config, a.Endpoint), KeyID: keyID}
}

// Queue sends to (and postpones on) one SQS queue.
func (a AWS) Queue(url string) *sqsqueue.Queue {
	return sqsqueue.New(awsclient.SQS(a.Config, a.Endpoint), url)
}

// Common are the settings every function reads.
type Common struct {
	Table      string
	StaleAfter time.Duration
	// LeaseCadence is the agents' lease interval, read by the API (told to
	// agents) and the prober (judged): never from the environment, so the
	// deployed cadence is space.LeaseInterval; the local stack sets it.
	LeaseCadence space.LeaseCadence
}

// ReadCommon reads TABLE_NAME and STALE_AFTER.
func ReadCommon(env *config.Env) Common {
	return Common{Table: env.Required("TABLE_NAME"), StaleAfter: env.Duration("STALE_AFTER", space.DefaultStaleAfter)}
}

// ProbeQueue sends probe messages (probing.Queue) through SQS.
type ProbeQueue struct{ Q *sqsqueue.Queue }

// Enqueue sends the messages in batches of ten.
func (q ProbeQueue) Enqueue(ctx context.Context, msgs []probing.Delayed) error {
	out := make([]sqsqueue.Message, len(msgs))
	for i, m := range msgs {
		out[i] = sqsqueue.Message{Body: m.Message.Encode(), Delay: m.Delay}
	}
	return q.Q.Send(ctx, out)
}

// RevisionQueue hands revisions to the claimer (space.RevisionQueue).
type RevisionQueue struct{ Q *sqsqueue.Queue }

// EnqueueRevision sends one message.
func (q RevisionQueue) EnqueueRevision(ctx context.Context, org, id string) error {
	body := revisions.Message{OrgID: org, RevisionID: id}.Encode()
	if err := q.Q.Send(ctx, []sqsqueue.Message{{Body: body}}); err != nil {
		return &space.Error{Kind: space.KindUnavailable, Message: "the revision could not be queued", Err: err}
	}
	return nil
}

// ProvisioningQueue sends provisioning deliveries (provisioning.Queue) and
// postpones received ones (provisioning.Redelivery) on one SQS queue.
type ProvisioningQueue struct{ Q *sqsqueue.Queue }

// Enqueue sends one message after delay.
func (q ProvisioningQueue) Enqueue(ctx context.Context, m provisioning.Message, delay time.Duration) error {
	if err := q.Q.Send(ctx, []sqsqueue.Message{{Body: m.Encode(), Delay: min(delay, sqsqueue.MaxDelay)}}); err != nil {
		return &space.Error{Kind: space.KindUnavailable, Message: "the provisioning job could not be queued", Err: err}
	}
	return nil
}

// Postpone delays a received message's next delivery.
func (q ProvisioningQueue) Postpone(ctx context.Context, receiptHandle string, d time.Duration) error {
	return q.Q.Postpone(ctx, receiptHandle, d)
}

// Clouds name the federation the deployed functions use
// (docs/deploying.md). They are read here, apart from the minter (wiring/clouds),
// so that the catalog API can show each account's trust setup without
// linking a cloud SDK.
type Clouds struct {
	GCPWorkloadIdentityProvider string
	AzureTokenAudience          string
	// Who the customers' clouds are told to trust (each account's setup).
	GCPFederationRole string
	AWSPrincipal      string
	AzureIssuer       string
	// AzureFederationRole is the role every minting function assumes for
	// an org's Entra token; its ARN is the token's subject.
	AzureFederationRole string
}

// ReadClouds reads GCP_WORKLOAD_IDENTITY_PROVIDER, AZURE_FEDERATED_TOKEN_*,
// GCP_FEDERATION_ROLE_ARN, AZURE_FEDERATION_ROLE_ARN and SPACES_AWS_PRINCIPAL.
func ReadClouds(env *config.Env) Clouds {
	return Clouds{
		GCPWorkloadIdentityProvider: env.String("GCP_WORKLOAD_IDENTITY_PROVIDER", ""),
		AzureTokenAudience:          env.String("AZURE_FEDERATED_TOKEN_AUDIENCE", ""),
		GCPFederationRole:           env.String("GCP_FEDERATION_ROLE_ARN", ""),
		AWSPrincipal:                env.String("SPACES_AWS_PRINCIPAL", ""),
		AzureIssuer:                 env.String("AZURE_FEDERATED_TOKEN_ISSUER", ""),
		AzureFederationRole:         env.String("AZURE_FEDERATION_ROLE_ARN", ""),
	}
}

// Trust is who Spaces is in its clouds, as the minter built from c sees it.
func (c Clouds) Trust() space.TrustConfig {
	return space.TrustConfig{
		AWSPrincipal: c.AWSPrincipal, GCPWorkloadIdentityProvider: c.GCPWorkloadIdentityProvider,
		GCPFederationRole: c.GCPFederationRole, AzureIssuer: c.AzureIssuer, AzureFederationRole: c.AzureFederationRole,
		AzureAudienceBase: c.AzureTokenAudience,
	}
}

// Wakes are where agents are woken (shared/agentwake): AWS IoT Core's
// data endpoint and the stack's MQTT client id prefix. Empty Endpoint: no
// presence channel (agents renew every lease interval; none is woken).
type Wakes struct {
	Endpoint, Prefix string
	// HTTP calls the endpoint (nil: agentwake's default; the local stack's
	// trusts its IoT Core's certificate).
	HTTP *http.Client
}

// ReadWakes reads IOT_DATA_ENDPOINT and AGENT_CLIENT_PREFIX (both optional:
// template.yaml sets them from the AgentMQTTEndpoint parameter).
func ReadWakes(env *config.Env) Wakes {
	return Wakes{Endpoint: env.String("IOT_DATA_ENDPOINT", ""), Prefix: env.String("AGENT_CLIENT_PREFIX", "")}
}

// Waker wakes agents through the data endpoint (nil without one).
func (a AWS) Waker(w Wakes) space.Waker {
	if w.Endpoint == "" {
		return nil
	}
	return &agentwake.Publisher{Endpoint: w.Endpoint, Prefix: w.Prefix, AWS: a.Config, HTTP: w.HTTP}
}

// Connections ends agents' MQTT connections through the data endpoint
// (nil without one).
func (a AWS) Connections(w Wakes) space.Disconnecter {
	if w.Endpoint == "" {
		return nil
	}
	return &agentwake.Publisher{Endpoint: w.Endpoint, Prefix: w.Prefix, AWS: a.Config, HTTP: w.HTTP}
}

// WakingWork is store's agent work, waking the agent after each piece
// recorded (store itself without a waker).
func WakingWork(store space.AgentWorkStore, w space.Waker, log *slog.Logger) space.AgentWorkStore {
	if w == nil {
		return store
	}
	return space.WakingWork{AgentWorkStore: store, Waker: w, Log: log}
}

// DeliveryQueue sends webhook deliveries (webhooks.Queue) through SQS.
type DeliveryQueue struct{ Q *sqsqueue.Queue }

// SendDeliveries sends one message per delivery, after delay.
func (q DeliveryQueue) SendDeliveries(ctx context.Context, ds []webhooks.Delivery, delay time.Duration) error {
	out := make([]sqsqueue.Message, len(ds))
	for i, d := range ds {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		out[i] = sqsqueue.Message{Body: string(b), Delay: min(delay, sqsqueue.MaxDelay)}
	}
	return q.Q.Send(ctx, out)
}
