package agents

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"spaces/shared/space"
)

// Authorize is the IoT Core custom authorizer (AgentAuthorizer): the
// agent's credential is the MQTT password. A refusal is an answer with
// isAuthenticated false, never a Lambda error, which IoT Core counts as
// the authorizer failing
// (https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth-lambda.html).
// The password never reaches a log.
func (h *Handlers) Authorize(ctx context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
	deny := events.IoTCoreCustomAuthorizerResponse{IsAuthenticated: false}
	m := req.ProtocolData
	if m == nil || m.MQTT == nil {
		h.log.InfoContext(ctx, "agent connection refused: not MQTT")
		return deny, nil
	}
	var connection string
	if req.ConnectionMetadata != nil {
		connection = req.ConnectionMetadata.ID
	}
	log := h.log.With("client_id", m.MQTT.ClientID, "connection_id", connection)
	res, err := h.agents.Authorize(ctx, m.MQTT.ClientID, m.MQTT.Username, m.MQTT.Password, req.Token, req.SignatureVerified)
	if err != nil {
		if space.KindOf(err) == space.KindUnauthenticated {
			log.InfoContext(ctx, "agent connection refused", "cause", cause(err))
		} else {
			log.ErrorContext(ctx, "agent connection refused: cannot check the credential", "error", err.Error())
		}
		return deny, nil
	}
	log.DebugContext(ctx, "agent connection authorized", "id", res.SpaceID)
	return events.IoTCoreCustomAuthorizerResponse{
		IsAuthenticated:          true,
		PrincipalID:              res.PrincipalID,
		DisconnectAfterInSeconds: uint32(res.DisconnectAfterSeconds),
		RefreshAfterInSeconds:    uint32(res.RefreshAfterSeconds),
		PolicyDocuments:          []*events.IAMPolicyDocument{AgentPolicy(res.ClientID, res.WakeTopic)},
	}, nil
}

// AgentPolicy is what an agent's connection may do: connect as its client
// id, subscribe to its wake topic and receive on it; no publish. Region
// and account are wildcards: the authorizer does not know them, and IoT
// policy resources take * (resources:
// https://docs.aws.amazon.com/iot/latest/developerguide/iot-action-resources.html ;
// actions: https://docs.aws.amazon.com/iot/latest/developerguide/iot-policy-actions.html).
func AgentPolicy(clientID, wakeTopic string) *events.IAMPolicyDocument {
	const arn = "arn:aws:iot:*:*:"
	allow := func(action, resource string) events.IAMPolicyStatement {
		return events.IAMPolicyStatement{Action: []string{action}, Effect: "Allow", Resource: []string{arn + resource}}
	}
	return &events.IAMPolicyDocument{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
		allow("iot:Connect", "client/"+clientID),
		allow("iot:Subscribe", "topicfilter/"+wakeTopic),
		allow("iot:Receive", "topic/"+wakeTopic),
	}}
}

// lifecycleEvent is IoT Core's connected/disconnected event, as the
// AgentPresenceRule's SELECT * passes it on
// (https://docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html).
type lifecycleEvent struct {
	ClientID            string `json:"clientId"`
	PrincipalIdentifier string `json:"principalIdentifier"`
	Timestamp           *int64 `json:"timestamp"` // epoch milliseconds
	EventType           string `json:"eventType"`
	VersionNumber       *int64 `json:"versionNumber"`
	DisconnectReason    string `json:"disconnectReason"`
}

// Presence stores the lifecycle events AgentPresenceQueue delivers, with
// partial batch failures (ReportBatchItemFailures): only a store outage
// is retried. A malformed event, another stack's client, an event whose
// principal is not the one the authorizer gives its client's space
// (space.PrincipalMatches) or a space that is gone is logged and dropped:
// retrying cannot mend it.
func (h *Handlers) Presence(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, r := range ev.Records {
		if err := h.presence(ctx, r.Body); err != nil {
			h.log.WarnContext(ctx, "cannot store an agent's presence; retried", "message_id", r.MessageId, "error", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	return resp, nil
}

func (h *Handlers) presence(ctx context.Context, body string) error {
	var e lifecycleEvent
	err := json.Unmarshal([]byte(body), &e)
	if err == nil && e.EventType == "connect_failed" {
		// A refused connect changes no presence; AgentPresenceRule
		// selects none, so one here is a rule deployed without that.
		h.log.DebugContext(ctx, "dropped a connect_failed lifecycle event", "client_id", e.ClientID)
		return nil
	}
	if err != nil || e.Timestamp == nil || e.VersionNumber == nil ||
		(e.EventType != "connected" && e.EventType != "disconnected") {
		h.log.WarnContext(ctx, "dropped a malformed lifecycle event", "body_bytes", len(body))
		return nil
	}
	id, ok := space.SpaceOfClient(h.prefix, e.ClientID)
	if !ok {
		h.log.DebugContext(ctx, "dropped the lifecycle event of another stack's client", "client_id", e.ClientID)
		return nil
	}
	if !space.PrincipalMatches(id, e.PrincipalIdentifier) {
		h.log.WarnContext(ctx, "dropped a lifecycle event whose principal is not its client's space's",
			"client_id", e.ClientID, "principal", e.PrincipalIdentifier)
		return nil
	}
	p := space.Presence{Connected: e.EventType == "connected", At: time.UnixMilli(*e.Timestamp).UTC(),
		Version: *e.VersionNumber, Reason: e.DisconnectReason}
	if p.Connected {
		p.Reason = ""
	}
	err = h.agents.RecordPresence(ctx, p, id)
	if space.KindOf(err) == space.KindNotFound {
		h.log.DebugContext(ctx, "dropped the lifecycle event of a space that is gone", "id", id)
		return nil
	}
	return err
}

// cause is a refusal's internal cause, for the log.
func cause(err error) string {
	if u := errors.Unwrap(err); u != nil {
		return u.Error()
	}
	return err.Error()
}

// Lambda is one handler for the agent channel's three event shapes: API
// Gateway's HTTP requests (requestContext; AgentFunction's), IoT Core's
// authorizer requests (protocolData) and AgentPresenceQueue's batches
// (Records; both PresenceFunction's). A shape whose handler is nil is not
// the function's: an error, as for a misrouted invocation.
type Lambda struct {
	HTTP      func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
	Authorize func(context.Context, events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error)
	Presence  func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
}

// Handle tells the shape by its top-level keys and passes the event on.
// An event of none of them is an error (a misrouted invocation); its
// content is never logged (an authorizer request holds a credential).
func (l Lambda) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var shape struct {
		Records        json.RawMessage `json:"Records"`
		ProtocolData   json.RawMessage `json:"protocolData"`
		RequestContext json.RawMessage `json:"requestContext"`
	}
	if err := json.Unmarshal(raw, &shape); err != nil {
		return nil, errors.New("the event is not a JSON object")
	}
	switch {
	case shape.Records != nil:
		return handle(ctx, raw, l.Presence)
	case shape.ProtocolData != nil:
		out, err := handle(ctx, raw, l.Authorize)
		if err != nil { // unreadable (a password not in base64): a refusal, not a failure
			return events.IoTCoreCustomAuthorizerResponse{IsAuthenticated: false}, nil
		}
		return out, nil
	case shape.RequestContext != nil:
		return handle(ctx, raw, l.HTTP)
	}
	return nil, errors.New("the event is none of an HTTP request, an IoT authorizer request or an SQS batch")
}

func handle[In, Out any](ctx context.Context, raw json.RawMessage, h func(context.Context, In) (Out, error)) (any, error) {
	if h == nil {
		return nil, errors.New("this function serves no event of this shape")
	}
	var in In
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, errors.New("the event cannot be read as its shape")
	}
	return h(ctx, in)
}
