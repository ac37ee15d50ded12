// Package eventbus publishes the registry's events to an EventBridge bus.
package eventbus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"spaces/shared/space"
	"spaces/shared/tracing"
)

const (
	// Source is the source of every Spaces event.
	Source = "spaces"
	// StatusChanged is the detail-type of a status transition.
	StatusChanged = "Space Status Changed"
)

// API is the part of the EventBridge client the publisher uses.
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Publisher puts events on one bus.
type Publisher struct {
	api API
	bus string
}

// NewClient returns an EventBridge client as awsclient builds the others
// (endpoint: the emulator's, "" in AWS). It is built here, not in
// awsclient, so that only the functions that publish link EventBridge.
func NewClient(cfg aws.Config, endpoint string) *eventbridge.Client {
	return eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) {
		o.TracerProvider = tracing.SDK()
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// New returns a publisher to the bus named (or with the ARN) bus.
func New(api API, bus string) *Publisher { return &Publisher{api: api, bus: bus} }

// StatusDetail is the detail of a "Space Status Changed" event.
type StatusDetail struct {
	OrgID   string       `json:"org_id"`
	SpaceID string       `json:"space_id"`
	From    space.Status `json:"from"`
	To      space.Status `json:"to"`
	Reason  string       `json:"reason"`
	At      time.Time    `json:"at"`
}

// PublishTransition publishes one status transition.
func (p *Publisher) PublishTransition(ctx context.Context, tr space.Transition) error {
	return p.put(ctx, StatusChanged, tr.At, StatusDetail{
		OrgID: tr.OrgID, SpaceID: tr.SpaceID, From: tr.From, To: tr.To, Reason: tr.Reason, At: tr.At.UTC(),
	})
}

// put publishes one event of detailType. EventBridge accepts or rejects each
// entry separately, so a rejected entry is an error too.
func (p *Publisher) put(ctx context.Context, detailType string, at time.Time, detail any) error {
	body, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("eventbridge: encode detail: %w", err)
	}
	out, err := p.api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{{
		EventBusName: aws.String(p.bus),
		Source:       aws.String(Source),
		DetailType:   aws.String(detailType),
		Detail:       aws.String(string(body)),
		Resources:    []string{},
		Time:         aws.Time(at.UTC()),
	}}})
	if err != nil {
		return fmt.Errorf("eventbridge PutEvents: %w", err)
	}
	if out.FailedEntryCount > 0 {
		e := out.Entries[0]
		return fmt.Errorf("eventbridge PutEvents rejected the event: %s: %s", aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
	}
	return nil
}
