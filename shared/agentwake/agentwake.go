// Package agentwake wakes a space's agent: one MQTT message on the
// agent's wake topic, published through AWS IoT Core's data plane, so that
// a connected agent (which otherwise renews its lease over HTTP only every
// space.PresenceFallback) renews at once and takes the work the lease
// answer carries (ARCHITECTURE.md, "Agent spaces").
//
// It is the data plane's Publish called over HTTPS and signed with SigV4
// (service "iotdata"), not the SDK's iotdataplane client: the Go module
// proxy this project builds from does not serve that package, and one
// signed POST is all it would do.
// https://docs.aws.amazon.com/iot/latest/apireference/API_iotdata_Publish.html
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		strings.TrimSuffix(p.Endpoint, "/")+"/topics/"+url.PathEscape(topic)+"?qos=1", bytes.NewReader(payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	creds, err := p.AWS.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("wake the agent of %s: credentials: %w", spaceID, err)
	}
	sum := sha256.Sum256(payload)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "iotdata", p.AWS.Region, time.Now()); err != nil {
		return fmt.Errorf("wake the agent of %s: sign: %w", spaceID, err)
	}
	c := p.HTTP
	if c == nil {
		c = &http.Client{Timeout: 5 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("wake the agent of %s: %w", spaceID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("wake the agent of %s: HTTP %d: %s", spaceID, resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}
