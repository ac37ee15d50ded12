package webhooks_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/space"
	"spaces/shared/webhook"
	"spaces/shared/webhooks"
	"spaces/shared/wiring/parts"
)

// BenchmarkDeliveryCost counts every AWS request of one event's way to one
// endpoint that answers 204, with the SDK metered (awscost): the fan-out
// (the org's endpoints read, the delivery queued) and the delivery (the
// endpoint read and its secrets opened, a place taken, the event kept for
// replay, the attempt logged, the place given back). The queue's receive
// and delete are the event source's, not SDK calls of ours: one each per
// batch, reported as deliveries. Each event is its own batch, the dearest
// case (a quiet org); a burst shares receives, deletes and places.
func BenchmarkDeliveryCost(b *testing.B) {
	env := emulatortest.Start(b)
	meter := awscost.New()
	a := parts.AWS{Config: meter.Instrument(env.Config), Endpoint: env.Endpoint}
	store := a.Store(env.Name(b, "SpacesTable"), a.Sealer(env.Resources["WebhookSecretsKey"].Name)...)
	queue := env.Resources["WebhooksQueue"]
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	b.Cleanup(srv.Close)
	q := parts.DeliveryQueue{Q: a.Queue(queue.URL)}
	eps := &space.Webhooks{Store: store, Rules: space.WebhookRules{AllowLoopback: true}, Now: time.Now,
		NewID: uuid.NewString, NewSecret: space.NewWebhookSecret}
	org := uuid.NewString()
	u := srv.URL
	if _, err := eps.Create(b.Context(), org, space.WebhookInput{URL: &u, EventTypes: []space.EventType{space.EventSpaceRegistered}}); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	fan := &webhooks.Fanout{Store: store, Queue: q, Log: log}
	d := &webhooks.Deliverer{Store: store, Queue: q, Endpoints: eps, Now: time.Now, Log: log,
		Sender: webhook.NewClient(webhook.Guard{AllowLoopback: true}, srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone())}
	// The event source's receives run on an unmetered client.
	plain := awsclient.SQS(env.Config, env.Endpoint)
	meter.Take()
	total := meter.Take()
	deliveries := 0
	for b.Loop() {
		e := space.WebhookEvent{OrgID: org, ID: "msg_" + uuid.NewString(), Type: space.EventSpaceRegistered, At: time.Now().UTC(),
			SpaceID: uuid.NewString(), Data: map[string]any{"space_id": "x"}}
		if n, err := fan.Fan(b.Context(), e); err != nil || n != 1 {
			b.Fatalf("fan-out: %d %v", n, err)
		}
		var got []events.SQSMessage
		for len(got) == 0 {
			out, err := plain.ReceiveMessage(b.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				b.Fatal(err)
			}
			for _, m := range out.Messages {
				got = append(got, events.SQSMessage{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body)})
				_, _ = plain.DeleteMessage(b.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(queue.URL), ReceiptHandle: m.ReceiptHandle})
			}
		}
		if resp, err := d.HandleSQS(b.Context(), events.SQSEvent{Records: got}); err != nil || len(resp.BatchItemFailures) != 0 {
			b.Fatalf("delivery: %v %+v", err, resp)
		}
		deliveries += len(got)
		total.Add(meter.Take())
	}
	n := float64(b.N)
	ops := total.Ops()
	sort.Strings(ops)
	for _, op := range ops {
		b.ReportMetric(total.Requests[op]/n, strings.ReplaceAll(op, " ", ":")+"/event")
	}
	b.ReportMetric(float64(deliveries)/n, "deliveries/event")
	b.ReportMetric(total.TotalRRU()/n, "RRU/event")
	b.ReportMetric(total.TotalWRU()/n, "WRU/event")
	b.ReportMetric(total.SQSRequests/n, "sqs-requests/event")
}
