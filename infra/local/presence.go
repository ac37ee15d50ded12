package local

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"spaces"
	"spaces/infra/iotcore"
	"spaces/infra/lambdarules"
	"spaces/infra/testcluster"
	"spaces/shared/awsclient"
	"spaces/shared/kmssign"
	"spaces/shared/space"
	"spaces/shared/tracing"
	"spaces/shared/wiring/agents"
	"spaces/shared/wiring/parts"
)

// The agents' presence channel, as deployed (ARCHITECTURE.md, "Agent
// spaces"): AWS IoT Core is infra/iotcore's local model, with the
// template's custom authorizer (PresenceFunction's handler) and topic rules
// (lifecycle events into AgentPresenceQueue), whose event source feeds
// PresenceFunction's presence handler. AgentFunction, whose URL is
// public, serves neither.

// Names of the local stack's presence channel: the stack is "spaces".
const (
	localStack       = "spaces"
	agentClientIDPre = localStack + "_"
	agentAuthorizer  = localStack + "-agent"
	// AgentAuthorizer's TokenKeyName (template.yaml): the local IoT Core
	// always signs, with the emulator's AgentTokenKey.
	agentTokenKeyName = "spaces-token"
)

// startPresence starts the agents' presence channel: the local IoT Core,
// AgentFunction's handlers (its routes, served by serveAgentRoutes) and
// PresenceFunction's (the custom authorizer), and the poller of
// AgentPresenceQueue into PresenceFunction's presence handler, as Lambda's SQS
// source does in AWS. Stopping closes the broker first, so that its last
// lifecycle events reach the queue while the poller still runs.
func (st *starting) startPresence(cfg *Config) (func(), error) {
	queue, ok := st.Resources["AgentPresenceQueue"]
	if !ok {
		return nil, errors.New("the template declares no AgentPresenceQueue")
	}
	// The broker's authorizer is PresenceFunction's; both functions are
	// told the broker's address once it runs, each built on its own as
	// each is its own process in AWS.
	var presence *agents.Handlers
	if err := st.startBroker(cfg, func(ctx context.Context, req events.IoTCoreCustomAuthorizerRequest) (events.IoTCoreCustomAuthorizerResponse, error) {
		st.authorizerInvocations.Add(1)
		return lambdarules.Handler(st.Functions.Get("PresenceFunction"), presence.Authorize)(ctx, req)
	}); err != nil {
		return nil, err
	}
	settings := agents.Settings{Common: st.common(cfg), ProbeQueue: st.probeQueue(cfg),
		Presence: space.PresenceConfig{Endpoint: st.Broker.MQTTAddr(), Authorizer: agentAuthorizer, ClientPrefix: agentClientIDPre,
			TokenKeyName: agentTokenKeyName}}
	withWakes := settings
	withWakes.TokenKey = st.Resources["AgentTokenKey"].Name // the issuer signs; the authorizer needs no key
	withWakes.Wakes = st.wakes()                            // the agent function ends a revoked space's connection
	st.agents = agents.NewHandlers(st.aws, withWakes, agents.Options{Log: cfg.Log})
	presence = agents.NewHandlers(st.aws, settings, agents.Options{Log: cfg.Log})
	poller := &lambdarules.Poller{SQS: awsclient.SQS(st.AWS, st.EmulatorURL), QueueURL: queue.URL, QueueARN: queue.ARN,
		Function: st.function("PresenceFunction"), DLQURL: st.Resources["AgentPresenceDLQ"].URL,
		Handler: tracing.Handler(cfg.Tracing, "agent-presence", presence.Presence), Log: cfg.Log}
	stopPoller := inBackground(poller.Run)
	return func() {
		st.Broker.Close()
		stopPoller()
	}, nil
}

// startBroker starts the local IoT Core with a certificate of a CA of its
// own (Stack.MQTTRoots trusts it) and the template's topic rules, each
// sending to its queue on the emulator, and authorize as the agents'
// custom authorizer.
func (st *Stack) startBroker(cfg *Config, authorize iotcore.Authorizer) error {
	ca, err := testcluster.NewCA()
	if err != nil {
		return err
	}
	server, roots, err := ca.LoopbackTLS()
	if err != nil {
		return err
	}
	st.MQTTRoots = roots
	trs, err := iotcore.TopicRulesFromTemplate(spaces.Template)
	if err != nil {
		return err
	}
	signing, err := st.tokenSigning()
	if err != nil {
		return err
	}
	sqsc := awsclient.SQS(st.AWS, st.EmulatorURL)
	var rules []iotcore.Rule
	for _, tr := range trs {
		q, ok := st.Resources[tr.QueueLogicalID]
		if !ok {
			return fmt.Errorf("topic rule %s sends to %s, which the template does not declare", tr.Name, tr.QueueLogicalID)
		}
		rules = append(rules, iotcore.Rule{Name: tr.Name, SQL: tr.SQLFor(localStack),
			Action: func(ctx context.Context, payload []byte) error {
				_, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(string(payload))})
				return err
			}})
	}
	if st.Broker, err = iotcore.Start(context.Background(), iotcore.Config{
		TLS:         server,
		Authorizers: map[string]iotcore.Authorizer{agentAuthorizer: authorize},
		Signing:     map[string]iotcore.Signing{agentAuthorizer: signing},
		Rules:       rules, Log: cfg.Log,
	}); err != nil {
		return fmt.Errorf("the local IoT Core: %w", err)
	}
	return nil
}

// tokenSigning is AgentAuthorizer's token signing as deployed: the
// template's TokenKeyName, and the public half of the emulator's
// AgentTokenKey, read as an operator reads it for AgentTokenPublicKey.
func (st *Stack) tokenSigning() (iotcore.Signing, error) {
	key, ok := st.Resources["AgentTokenKey"]
	if !ok {
		return iotcore.Signing{}, errors.New("the template declares no AgentTokenKey")
	}
	pemKey, err := kmssign.PublicKeyPEM(context.Background(), awsclient.KMS(st.AWS, st.EmulatorURL), key.Name)
	if err != nil {
		return iotcore.Signing{}, fmt.Errorf("AgentTokenKey: %w", err)
	}
	return iotcore.SigningFromPEM(agentTokenKeyName, map[string]string{"current": pemKey})
}

// wakes are where the workflows wake agents: the local IoT Core's data
// endpoint, over a client that trusts its certificate.
func (st *Stack) wakes() parts.Wakes {
	if st.Broker == nil {
		return parts.Wakes{}
	}
	return parts.Wakes{Endpoint: st.Broker.DataURL(), Prefix: agentClientIDPre, HTTP: &http.Client{Timeout: 5 * time.Second,
		Transport: recordWakes(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: st.MQTTRoots, MinVersion: tls.VersionTLS12}})}}
}
