// Package client is the Spaces agent's side of the agent routes
// (shared/httpapi/agent.go): it exchanges the one-time bootstrap for a
// credential bound to its space, keeps that credential in a Secret so a
// restarted pod carries on without a new bootstrap, renews it before it
// expires, and renews the space's lease on the cadence Spaces answers,
// reporting the cluster's /version and its own version; where the lease
// answer names a presence channel it holds an MQTT connection to AWS IoT
// Core instead and renews only when it connects, when woken and every
// fallback interval (presence.go). It only ever calls out: it opens no
// port.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"spaces/shared/space"
)

// Version is the agent's own version, reported with every lease renewal.
const Version = "0.1.0"

// ErrRefused is Spaces refusing the agent's credential (401): the space
// was deregistered, or a newer install (a fresh bootstrap) revoked it.
// Spaces answers every refusal alike, on purpose; the agent stops.
var ErrRefused = errors.New("spaces refused the agent's credential")

// credential is the answer of an exchange or a renewal.
type credential struct {
	Credential           string    `json:"credential"`
	ExpiresAt            time.Time `json:"expires_at"`
	SpaceID              string    `json:"space_id"`
	LeaseIntervalSeconds int       `json:"lease_interval_seconds"`
	TokenSignature       string    `json:"token_signature"`
}

// ServerVersion is what the cluster's GET /version answered, the fields
// the lease report carries (as the probe stores them).
type ServerVersion struct {
	GitVersion string `json:"gitVersion"`
	Platform   string `json:"platform"`
}

// spacesAPI calls the agent routes. Secrets go in the Authorization
// header only, never in a path or query, and never into an error.
type spacesAPI struct {
	base *url.URL
	http *http.Client
	// cluster is the agent's cluster, sent at the exchange (which binds
	// the credentials to it) and with every lease (nil: not known).
	cluster *space.ClusterBinding
}

// problem is an RFC 9457 answer, kept for the log (it never holds a
// token: Spaces logs none and answers none but the credential's own).
type problem struct {
	Status int    `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

// httpError is a non-2xx answer.
type httpError struct {
	op      string
	status  int
	problem problem
}

func (e *httpError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s %s", e.op, e.status, e.problem.Title, e.problem.Detail)
}

// Is makes a 401 an ErrRefused.
func (e *httpError) Is(target error) bool {
	return target == ErrRefused && e.status == http.StatusUnauthorized
}

func (c *spacesAPI) exchange(ctx context.Context, bootstrap string) (credential, error) {
	var out credential
	var body any
	if c.cluster != nil {
		body = map[string]any{"cluster": c.cluster}
	}
	return out, c.call(ctx, "exchange the bootstrap", http.MethodPost, "agent/exchange", bootstrap, body, &out)
}

func (c *spacesAPI) renew(ctx context.Context, cred string) (credential, error) {
	var out credential
	return out, c.call(ctx, "renew the credential", http.MethodPost, "agent/credential", cred, nil, &out)
}

// leaseAnswer is what a lease renewal answers: the cadence Spaces asks
// for, the work waiting for the agent, and the presence channel to hold
// (nil: none; renew every interval).
type leaseAnswer struct {
	LeaseIntervalSeconds int                     `json:"lease_interval_seconds"`
	Work                 space.AgentWork         `json:"work"`
	Presence             *space.PresenceEndpoint `json:"presence,omitempty"`
}

// lease renews the space's lease.
func (c *spacesAPI) lease(ctx context.Context, cred, spaceID string, v ServerVersion, nodes *space.Nodes) (leaseAnswer, error) {
	body := map[string]any{"agent_version": Version, "server_version": v}
	if nodes != nil {
		body["nodes"] = nodes
	}
	if c.cluster != nil {
		body["cluster"] = c.cluster
	}
	var out leaseAnswer
	err := c.call(ctx, "renew the lease", http.MethodPut, "agent/spaces/"+url.PathEscape(spaceID)+"/lease", cred, body, &out)
	return out, err
}

func (c *spacesAPI) call(ctx context.Context, op, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := c.base.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "spaces-agent/"+Version)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	defer resp.Body.Close()
	// A lease answer carries up to five revisions (space.MaxRevisionsPerLease).
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s: read the answer: %w", op, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &httpError{op: op, status: resp.StatusCode}
		if strings.Contains(resp.Header.Get("Content-Type"), "json") {
			_ = json.Unmarshal(b, &e.problem)
		}
		return e
	}
	if out == nil {
		return nil // 204
	}
	// Numbers as pushed: a manifest's integers stay exact.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s: the answer is not the expected JSON: %w", op, err)
	}
	return nil
}
