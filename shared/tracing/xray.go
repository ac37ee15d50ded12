package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// xrayExporter sends each span to the X-Ray daemon (in Lambda, the one
// active tracing runs beside the function, at AWS_XRAY_DAEMON_ADDRESS) as
// an independent subsegment of its trace: the invocation's span under the
// segment Lambda opened, every other span under its parent. One UDP
// datagram per span, no dependency and no connection to keep: a lost
// datagram loses one span, never a request.
type xrayExporter struct{ conn net.Conn }

func newXRayExporter(addr string) (*xrayExporter, error) {
	// The daemon address may be "host:port" or "tcp:host:port udp:host:port".
	for f := range strings.FieldsSeq(addr) {
		if rest, ok := strings.CutPrefix(f, "udp:"); ok {
			addr = rest
		}
	}
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("X-Ray daemon %s: %w", addr, err)
	}
	return &xrayExporter{conn: conn}, nil
}

const xrayHeader = `{"format":"json","version":1}` + "\n"

// subsegment is the part of X-Ray's segment document Spaces fills.
type subsegment struct {
	Name        string            `json:"name"`
	ID          string            `json:"id"`
	TraceID     string            `json:"trace_id"`
	ParentID    string            `json:"parent_id,omitempty"`
	Type        string            `json:"type"`
	StartTime   float64           `json:"start_time"`
	EndTime     float64           `json:"end_time"`
	Namespace   string            `json:"namespace,omitempty"`
	Fault       bool              `json:"fault,omitempty"`
	AWS         map[string]string `json:"aws,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func xrayTraceID(id trace.TraceID) string {
	h := id.String()
	return "1-" + h[:8] + "-" + h[8:]
}

func toSubsegment(s sdktrace.ReadOnlySpan) subsegment {
	doc := subsegment{
		Name: xrayName(s.Name()), ID: s.SpanContext().SpanID().String(), TraceID: xrayTraceID(s.SpanContext().TraceID()),
		Type:      "subsegment",
		StartTime: float64(s.StartTime().UnixNano()) / 1e9, EndTime: float64(s.EndTime().UnixNano()) / 1e9,
		Fault: s.Status().Code == codes.Error,
	}
	if p := s.Parent(); p.IsValid() {
		doc.ParentID = p.SpanID().String()
	}
	for _, a := range s.Attributes() {
		switch a.Key {
		case "rpc.system":
			if a.Value.AsString() == "aws-api" {
				doc.Namespace = "aws"
			}
		case "rpc.method":
			doc.AWS = map[string]string{"operation": a.Value.AsString()}
		case "provider":
			doc.Annotations = map[string]string{"provider": a.Value.AsString()}
		}
	}
	if doc.Namespace == "" && s.SpanKind() == trace.SpanKindClient {
		doc.Namespace = "remote"
	}
	return doc
}

// xrayName keeps the characters X-Ray allows in a name.
func xrayName(n string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '_' || r == '.' || r == ':' || r == '/' || r == '%' || r == '&' || r == '#' || r == '=' ||
			r == '+' || r == '\\' || r == '-' || r == '@' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' {
			return r
		}
		return '_'
	}, n)
}

func (e *xrayExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	var firstErr error
	for _, s := range spans {
		doc, _ := json.Marshal(toSubsegment(s)) // strings and numbers only
		if _, err := e.conn.Write(append([]byte(xrayHeader), doc...)); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func (e *xrayExporter) Shutdown(context.Context) error { return e.conn.Close() }
