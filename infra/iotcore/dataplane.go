package iotcore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// dataPlane serves IoT Core's HTTPS Publish
// (https://docs.aws.amazon.com/iot/latest/apireference/API_iotdata_Publish.html):
// POST /topics/{topic}?qos=0|1[&retain=true] with the payload as body. The
// request's SigV4 signature is not verified, as in the emulator.
type dataPlane struct {
	ln  net.Listener
	srv *http.Server
}

func startDataPlane(b *Broker, tlsCfg *tls.Config) (*dataPlane, error) {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tlsCfg)
	if err != nil {
		return nil, fmt.Errorf("iotcore: data plane listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /topics/", b.publishHTTP)
	d := &dataPlane{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = d.srv.Serve(ln) }()
	return d, nil
}

func (d *dataPlane) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.srv.Shutdown(ctx)
}

// publishHTTP publishes a data-plane message to the broker's subscribers and
// rules. Errors use the service's JSON error shape and exception names.
func (b *Broker) publishHTTP(w http.ResponseWriter, r *http.Request) {
	// The topic is one path label, so '/' inside it arrives as %2F.
	topic, err := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/topics/"))
	if err != nil || topic == "" || strings.ContainsAny(topic, "+#") {
		dataError(w, http.StatusBadRequest, "InvalidRequestException", "the topic is not a valid topic name")
		return
	}
	if err := checkTopic(topic); err != nil {
		dataError(w, http.StatusBadRequest, "InvalidRequestException", err.Error())
		return
	}
	var qos byte
	switch q := r.URL.Query().Get("qos"); q {
	case "", "0":
	case "1":
		qos = 1
	default:
		dataError(w, http.StatusBadRequest, "InvalidRequestException", "qos must be 0 or 1")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPayloadBytes+1))
	if err != nil {
		dataError(w, http.StatusBadRequest, "InvalidRequestException", "reading the body: "+err.Error())
		return
	}
	if len(body) > MaxPayloadBytes {
		dataError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLargeException",
			fmt.Sprintf("the payload is over %d bytes", MaxPayloadBytes))
		return
	}
	// "Request: metered by the number of 5 KB messages needed to encode the
	// body" (https://aws.amazon.com/iot-core/pricing/additional-details/).
	b.usage.messages.Add(units(len(body)))
	retain := r.URL.Query().Get("retain") == "true"
	if err := b.srv.Publish(topic, body, retain, qos); err != nil {
		dataError(w, http.StatusInternalServerError, "InternalFailureException", err.Error())
		return
	}
	w.WriteHeader(http.StatusOK)
}

func dataError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", kind)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
