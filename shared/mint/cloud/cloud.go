// Package cloud holds what the provider minters share: turning a cloud's
// answer into the domain's errors, with the reasons the prober and the API
// report.
package cloud

import (
	"context"
	"errors"
	"net"

	"spaces/shared/space"
)

// kinds maps each minting failure reason to the error kind the API answers
// with: the cloud refusing or not knowing the cluster is a bad gateway (502),
// the cloud or the credentials being unavailable is 503.
var kinds = map[string]space.Kind{
	space.ReasonClusterNotFound:        space.KindBadGateway,
	space.ReasonAccessDenied:           space.KindBadGateway,
	space.ReasonCloudUnavailable:       space.KindUnavailable,
	space.ReasonCredentialsUnavailable: space.KindUnavailable,
	space.ReasonCloudRefused:           space.KindInvalid,
}

// Errorf builds the domain error of a minting failure; cause is kept for
// the log only.
func Errorf(reason, msg string, cause error) *space.Error {
	k, ok := kinds[reason]
	if !ok {
		k = space.KindInternal
	}
	return &space.Error{Kind: k, Reason: reason, Message: msg, Err: cause}
}

// Unavailable classifies an error that is not the cloud's verdict: a
// timeout, a network failure, a 5xx or throttling.
func Unavailable(op string, err error) *space.Error {
	msg := op + ": the cloud API is unavailable"
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = op + ": the cloud API did not answer in time"
	case errors.As(err, &ne):
		msg = op + ": cannot reach the cloud API"
	}
	return Errorf(space.ReasonCloudUnavailable, msg, err)
}

// NotFound is the registration-check form of a ClusterNotFound failure: a
// field error on the cluster name, answered 422 with the cloud's message.
func NotFound(err error) error {
	var e *space.Error
	if !errors.As(err, &e) || e.Reason != space.ReasonClusterNotFound {
		return err
	}
	return &space.Error{Kind: space.KindInvalid, Reason: space.ReasonClusterNotFound,
		Message: "the cluster does not exist in the cloud account: " + e.Message,
		Fields:  []space.FieldError{{Field: "config.clusterName", Reason: e.Message}}, Err: e.Err}
}

// Refused is a cloud's refusal of a creation (unsupported version, unknown
// machine type, quota, bad network, name taken): 422 with the cloud's own
// words, which a retry of the same request cannot change.
func Refused(msg string, cause error) *space.Error {
	return Errorf(space.ReasonCloudRefused, msg, cause)
}
