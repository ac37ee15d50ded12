package kubeprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"spaces/shared/space"
)

// classify maps a failed GET /version to a probe reason and a short message.
// Messages are built from what went wrong, never from the request, so they
// cannot carry the token; Probe scrubs them anyway.
func classify(ctx context.Context, err error, host string, timeout time.Duration) (string, string) {
	if errors.Is(err, errBodyTooLarge) {
		return space.ReasonBadResponse, fmt.Sprintf("the /version answer is larger than %d KiB", maxVersionBody>>10)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := int(status.Status().Code)
		switch code {
		case http.StatusUnauthorized:
			return space.ReasonUnauthorized, "the API server rejected the credentials (401 Unauthorized)"
		case http.StatusForbidden:
			return space.ReasonUnauthorized, "the credentials are forbidden to read /version (403 Forbidden)"
		}
		return space.ReasonBadResponse, fmt.Sprintf("GET /version answered %d %s", code, http.StatusText(code))
	}

	var (
		verify    *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		alert     tls.AlertError
		dns       *net.DNSError
		netErr    net.Error
	)
	switch {
	case errors.As(err, &verify):
		return space.ReasonUnreachable, "TLS verification failed: " + verify.Err.Error()
	case errors.As(err, &unknownCA):
		return space.ReasonUnreachable, "TLS verification failed: " + unknownCA.Error()
	case errors.As(err, &hostname):
		return space.ReasonUnreachable, "TLS verification failed: " + hostname.Error()
	case errors.As(err, &invalid):
		return space.ReasonUnreachable, "TLS verification failed: " + invalid.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return space.ReasonTimeout, fmt.Sprintf("no answer from %s within %s", host, timeout)
	case errors.Is(err, context.Canceled):
		return space.ReasonTimeout, fmt.Sprintf("probe of %s canceled before it answered", host)
	case errors.As(err, &record), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// net/http replaces the RecordHeaderError of a plain HTTP answer
		// with an untyped error; its text is all there is to match.
		return space.ReasonUnreachable, fmt.Sprintf("TLS handshake with %s failed: the server does not speak TLS", host)
	case errors.As(err, &alert):
		return space.ReasonUnreachable, fmt.Sprintf("TLS handshake with %s failed: %s", host, alert.Error())
	case errors.As(err, &dns):
		return space.ReasonUnreachable, fmt.Sprintf("cannot resolve %s: %s", dns.Name, dnsReason(dns))
	case errors.Is(err, syscall.ECONNREFUSED):
		return space.ReasonUnreachable, fmt.Sprintf("connection refused by %s", host)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return space.ReasonUnreachable, fmt.Sprintf("connection reset by %s", host)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return space.ReasonUnreachable, fmt.Sprintf("%s closed the connection without answering", host)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return space.ReasonUnreachable, fmt.Sprintf("no route to %s", host)
	}
	// Whatever failed, a probe that ran out of time is a timeout.
	if ctx.Err() != nil {
		return space.ReasonTimeout, fmt.Sprintf("no answer from %s within %s", host, timeout)
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return space.ReasonUnreachable, fmt.Sprintf("cannot reach %s: %s failed: %v", host, op.Op, op.Err)
	}
	return space.ReasonUnreachable, fmt.Sprintf("cannot reach %s: %v", host, err)
}

func dnsReason(e *net.DNSError) string {
	switch {
	case e.IsNotFound:
		return "no such host"
	case e.IsTimeout:
		return "DNS timed out"
	}
	return e.Err
}
