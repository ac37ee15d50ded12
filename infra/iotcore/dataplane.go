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
	"strconv"
	"strings"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// dataPlane serves IoT Core's HTTPS Publish
// (https://docs.aws.amazon.com/iot/latest/apireference/API_iotdata_Publish.html):
// POST /topics/{topic}?qos=0|1[&retain=true] with the payload as body; and
// DeleteConnection
// (https://docs.aws.amazon.com/iot/latest/apireference/API_iotdata_DeleteConnection.html):
// DELETE /connections/{clientId}. The requests' SigV4 signatures are not
// verified, as in the emulator.
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
	mux.HandleFunc("DELETE /connections/", b.deleteConnectionHTTP)
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

// deleteConnectionHTTP disconnects a connected client at once: the broker
// sends an MQTT 5 client a DISCONNECT ("The message broker sends a
// DISCONNECT packet to the device",
// https://docs.aws.amazon.com/iot/latest/developerguide/mqtt.html) and
// closes the connection, whose disconnected lifecycle event carries
// disconnectReason API_INITIATED_DISCONNECT (life-cycle-events.html). The
// client id is 1-128 characters and does not start with '$'; one with no
// connection is ResourceNotFoundException (404). cleanSession and
// preventWillMessage must be booleans when given and change nothing else:
// mochi publishes the closed client's will, as IoT Core does by default,
// and keeps or drops its session as on any disconnect.
func (b *Broker) deleteConnectionHTTP(w http.ResponseWriter, r *http.Request) {
	id, err := url.PathUnescape(strings.TrimPrefix(r.URL.EscapedPath(), "/connections/"))
	if err != nil || id == "" || len(id) > MaxClientIDBytes || strings.HasPrefix(id, "$") {
		dataError(w, http.StatusBadRequest, "InvalidRequestException", "the client id is not valid")
		return
	}
	for _, param := range []string{"cleanSession", "preventWillMessage"} {
		if v := r.URL.Query().Get(param); v != "" {
			if _, err := strconv.ParseBool(v); err != nil {
				dataError(w, http.StatusBadRequest, "InvalidRequestException", param+" must be true or false")
				return
			}
		}
	}
	b.mu.Lock()
	c := b.live[id]
	if c != nil && c.reason != "" {
		c = nil // already being closed
	}
	b.mu.Unlock()
	if c == nil {
		dataError(w, http.StatusNotFound, "ResourceNotFoundException", "no connection of client "+id)
		return
	}
	b.log.Debug("disconnecting", "client", id, "reason", ReasonAPIInitiated)
	b.kick(c, ReasonAPIInitiated, packets.ErrAdministrativeAction)
	w.WriteHeader(http.StatusOK)
}

func dataError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Errortype", kind)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}
