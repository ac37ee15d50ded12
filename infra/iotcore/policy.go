package iotcore

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// principalPattern is the custom authorizer's principalId rule: "an
// alphanumeric string ... at least one character, and no more than 128
// characters ... ([a-zA-Z0-9]){1,128}"
// (https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth-lambda.html).
var principalPattern = regexp.MustCompile(`^[a-zA-Z0-9]{1,128}$`)

// Bounds of disconnectAfterInSeconds and refreshAfterInSeconds: 300-86400 s,
// as space.Agents.Authorize keeps them. The custom-auth-lambda page lists both
// fields (https://docs.aws.amazon.com/iot/latest/developerguide/custom-auth-lambda.html);
// the range is not quoted from its own wording.
const (
	minAuthSeconds = 300
	maxAuthSeconds = 86400
)

// validateAuthResponse checks an authorizer's answer as IoT does before it
// lets a connection in: an invalid response refuses it.
func validateAuthResponse(r events.IoTCoreCustomAuthorizerResponse) error {
	if !r.IsAuthenticated {
		return fmt.Errorf("not authenticated")
	}
	if !principalPattern.MatchString(r.PrincipalID) {
		return fmt.Errorf("principalId %q is not 1-128 alphanumeric characters", r.PrincipalID)
	}
	if d := r.DisconnectAfterInSeconds; d < minAuthSeconds || d > maxAuthSeconds {
		return fmt.Errorf("disconnectAfterInSeconds %d is outside %d-%d", d, minAuthSeconds, maxAuthSeconds)
	}
	if d := r.RefreshAfterInSeconds; d < minAuthSeconds || d > maxAuthSeconds {
		return fmt.Errorf("refreshAfterInSeconds %d is outside %d-%d", d, minAuthSeconds, maxAuthSeconds)
	}
	if len(r.PolicyDocuments) == 0 {
		return fmt.Errorf("no policyDocuments")
	}
	for _, d := range r.PolicyDocuments {
		if d == nil {
			return fmt.Errorf("a policy document is null")
		}
		for _, s := range d.Statement {
			if s.Effect != "Allow" && s.Effect != "Deny" {
				return fmt.Errorf("statement effect %q is neither Allow nor Deny", s.Effect)
			}
		}
	}
	return nil
}

// Actions and resource kinds of IoT policies
// (https://docs.aws.amazon.com/iot/latest/developerguide/iot-policy-actions.html,
// https://docs.aws.amazon.com/iot/latest/developerguide/iot-action-resources.html):
// iot:Connect on client/<id>, iot:Subscribe on topicfilter/<filter>,
// iot:Receive and iot:Publish on topic/<topic>.
const (
	actConnect   = "iot:Connect"
	actSubscribe = "iot:Subscribe"
	actReceive   = "iot:Receive"
	actPublish   = "iot:Publish"
)

// policy is the documents an authorizer returned for one connection.
type policy []*events.IAMPolicyDocument

// allows evaluates action on resource as IAM does: an explicit Deny wins, an
// Allow is needed, and anything not allowed is denied. '*' and '?' are the
// wildcards in Action and Resource; actions compare case-insensitively.
// Policy variables and Condition are not modelled (the documents Spaces'
// authorizer returns use neither).
func (p policy) allows(action, resource string) bool {
	allowed := false
	for _, d := range p {
		for _, s := range d.Statement {
			if !matchesAny(s.Action, action, true) || !matchesAny(s.Resource, resource, false) {
				continue
			}
			if s.Effect == "Deny" {
				return false
			}
			allowed = true
		}
	}
	return allowed
}

func matchesAny(patterns []string, v string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			if wildcard(strings.ToLower(p), strings.ToLower(v)) {
				return true
			}
		} else if wildcard(p, v) {
			return true
		}
	}
	return false
}

// wildcard matches s against p, where '*' is any run of characters and '?'
// one character (IAM's wildcards; MQTT's '+' and '#' are literal here).
func wildcard(p, s string) bool {
	px, sx := 0, 0
	star, mark := -1, 0
	for sx < len(s) {
		switch {
		case px < len(p) && (p[px] == '?' || p[px] == s[sx]):
			px++
			sx++
		case px < len(p) && p[px] == '*':
			star, mark = px, sx
			px++
		case star >= 0:
			px = star + 1
			mark++
			sx = mark
		default:
			return false
		}
	}
	for px < len(p) && p[px] == '*' {
		px++
	}
	return px == len(p)
}
