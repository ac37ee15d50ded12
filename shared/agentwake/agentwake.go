// Package agentwake wakes a space's agent: one MQTT message on the
// agent's wake topic, published through AWS IoT Core's data plane, so that
// a connected agent (which otherwise renews its lease over HTTP only every
// space.PresenceFallback) renews at once and takes the work the lease
// answer carries (ARCHITECTURE.md, "Agent spaces"). It also ends an
// agent's MQTT connection at once (Disconnect, the data plane's
// DeleteConnection), for a space deregistered.
//
// It is the data plane's Publish and DeleteConnection called over HTTPS
// and signed with SigV4 (service "iotdata"), not the SDK's iotdataplane
// client: the Go module proxy this project builds from does not serve
// that package, and one signed request is all it would do.
// https://docs.aws.amazon.com/iot/latest/apireference/API_iotdata_Publish.html
// https://docs.aws.amazon.com/iot/latest/apireference/API_iotdata_DeleteConnection.html
package agentwake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"spaces/shared/space"
)

// Publisher publishes wakes for one stack's agents.
type Publisher struct {
	// Endpoint is the account's data endpoint,
	// https://<id>-ats.iot.<region>.amazonaws.com (locally infra/iotcore's).
	Endpoint string
	// Prefix is the stack's MQTT client id prefix (space.AgentClientID).
	Prefix string
	AWS    aws.Config
	HTTP   *http.Client // default: a 5 s timeout
}

// payload says nothing but "renew now": the work itself rides the lease
// answer, authenticated by the agent's credential, never the message.
var payload = []byte(`{"wake":true}`)

// Wake publishes one wake (QoS 1) on spaceID's wake topic.
func (p *Publisher) Wake(ctx context.Context, spaceID string) error {
	topic := space.WakeTopic(p.Prefix, spaceID)
	resp, err := p.do(ctx, http.MethodPost, "/topics/"+url.PathEscape(topic)+"?qos=1", payload)
	if err != nil {
		return fmt.Errorf("wake the agent of %s: %w", spaceID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("wake the agent of %s: %w", spaceID, answer(resp))
	}
	return nil
}

// Disconnect ends spaceID's agent MQTT connection at once: DELETE
// /connections/<client id>?cleanSession=true. IoT Core closes the
// connection and publishes its disconnected lifecycle event with
// disconnectReason API_INITIATED_DISCONNECT
// (https://docs.aws.amazon.com/iot/latest/developerguide/life-cycle-events.html).
// A client not connected (404, ResourceNotFoundException) is no error:
// there is nothing to end.
func (p *Publisher) Disconnect(ctx context.Context, spaceID string) error {
	client := space.AgentClientID(p.Prefix, spaceID)
	resp, err := p.do(ctx, http.MethodDelete, "/connections/"+url.PathEscape(client)+"?cleanSession=true", nil)
	if err != nil {
		return fmt.Errorf("disconnect the agent of %s: %w", spaceID, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("disconnect the agent of %s: %w", spaceID, answer(resp))
	}
	return nil
}

// do sends one data-plane request signed with SigV4 for "iotdata".
func (p *Publisher) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(p.Endpoint, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	creds, err := p.AWS.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "iotdata", p.AWS.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	c := p.HTTP
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	return c.Do(req)
}

// answer is an error answer's status and the start of its body.
func answer(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
}
