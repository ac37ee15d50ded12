package probing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"spaces"
	"spaces/infra/emulator"
	"spaces/infra/local"
	"spaces/infra/openapitest"
	"spaces/infra/testcluster"
	"spaces/shared/space"
	"spaces/shared/webhook"
)

// TestInventoryEventsOncePerThreshold: 70 simulated days of probes, one
// every six hours, through the scheduler's probe index and the prober
// against a real TLS server, on the emulator's table, their events read
// from the table's stream as the webhooks function reads them
// (dynamostore.Store.WebhookEvent). Each threshold is sent exactly once,
// each body follows its schema in openapi.yaml, and the space is written
// only for those (and a renewal): the probes in between write nothing.
//
// Two runs, since the TLS handshake judges the serving certificate at the
// real time while the support files hold past dates: the support run
// starts 67 days before EKS 1.31's end of standard support (2025-11-26),
// with the cluster patched on day 20 (support 60 and 14, one version
// change); the certificate run starts now, with a certificate expiring on
// day 40 and renewed on day 35 until day 90 (30 and 7 for the first, 30
// for the renewed one).
func TestInventoryEventsOncePerThreshold(t *testing.T) {
	t.Run("support and version", func(t *testing.T) {
		start := time.Date(2025, 9, 20, 0, 0, 0, 0, time.UTC)
		got, writes := simulateInventory(t, start, nil, map[int]func(*testcluster.Cluster, *testcluster.CA){
			20: func(c *testcluster.Cluster, _ *testcluster.CA) { c.SetVersion("v1.31.5-eks-2", "linux/amd64") },
		})
		want := map[string]int{"space.support_ending 60": 1, "space.support_ending 14": 1, "space.version_changed to v1.31.5-eks-2": 1}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events over 70 days:\n got %v\nwant %v", got, want)
		}
		// The first probe, then one write per event.
		if writes != 1+3 {
			t.Errorf("%d writes after the registration, want 4: the first probe, two thresholds, the version change", writes)
		}
	})
	t.Run("certificate", func(t *testing.T) {
		start := time.Now().UTC().Truncate(time.Second)
		day := func(n int) time.Time { return start.AddDate(0, 0, n) }
		firstUntil, renewedUntil := day(40), day(90)
		got, writes := simulateInventory(t, start, &firstUntil, map[int]func(*testcluster.Cluster, *testcluster.CA){
			35: func(c *testcluster.Cluster, ca *testcluster.CA) {
				renewed, err := ca.ServerCertificateUntil(renewedUntil)
				if err != nil {
					t.Fatal(err)
				}
				c.SetServingCertificate(renewed)
			},
		})
		want := map[string]int{
			"space.certificate_expiring 30 until " + firstUntil.Format(time.DateOnly):   1,
			"space.certificate_expiring 7 until " + firstUntil.Format(time.DateOnly):    1,
			"space.certificate_expiring 30 until " + renewedUntil.Format(time.DateOnly): 1,
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events over 70 days:\n got %v\nwant %v", got, want)
		}
		// The first probe, three thresholds, the renewal.
		if writes != 1+3+1 {
			t.Errorf("%d writes after the registration, want 5: the first probe, three thresholds, the renewal", writes)
		}
	})
}

// simulateInventory probes one space (its cluster answering v1.31.4, its
// certificate valid until notAfter, or two years) every six hours for 70
// days from start, calling on[d] at the start of day d, and returns the
// inventory events its stored changes made, by type and threshold, and how
// many times the space was written after its registration.
func simulateInventory(t *testing.T, start time.Time, notAfter *time.Time, on map[int]func(*testcluster.Cluster, *testcluster.CA)) (map[string]int, int64) {
	h := newHarness(t, 5*time.Second)
	h.clock.Set(start)
	day := func(n int) time.Time { return start.AddDate(0, 0, n) }
	ca, err := testcluster.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	until := time.Now().AddDate(2, 0, 0)
	if notAfter != nil {
		until = *notAfter
	}
	cert, err := ca.ServerCertificateUntil(until)
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.NewForTest(t, testcluster.WithCA(ca), testcluster.WithServingCertificate(cert),
		testcluster.WithVersion("v1.31.4-eks-1", "linux/amd64"))

	ctx := context.Background()
	ss := emulator.Streams(h.env.Config, h.env.Endpoint)
	arn := h.env.Resources["SpacesTable"].StreamARN
	sd, err := ss.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil || len(sd.StreamDescription.Shards) == 0 {
		t.Fatalf("the table's stream: %v, %+v", err, sd)
	}
	its := map[string]*string{}
	for _, sh := range sd.StreamDescription.Shards {
		it, err := ss.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId,
			ShardIteratorType: stypes.ShardIteratorTypeLatest})
		if err != nil {
			t.Fatal(err)
		}
		its[aws.ToString(sh.ShardId)] = it.ShardIterator
	}

	s := h.register("inventory", false)
	h.minter.Set(s.ID, c.Credentials())
	ticks := 0
	for now := start; now.Before(day(70)); now = now.Add(6 * time.Hour) {
		for d, f := range on {
			if now.Equal(day(d)) {
				f(c, ca)
			}
		}
		// One tick, and its messages' spread over the interval delivered.
		h.clock.Set(now)
		next := now
		h.run(&next, now.Add(space.DefaultProbeInterval-time.Second), nil)
		ticks++
	}
	if n := c.Requests("/version"); n < ticks {
		t.Errorf("%d GET /version in %d ticks: the space was not probed each tick", n, ticks)
	}
	if got := h.get(s.ID); got.Status != space.Active {
		t.Errorf("the space is %s (%s), want active throughout", got.Status, got.Probe.Message)
	}

	validator := openapitest.New(t, spaces.OpenAPI)
	got := map[string]int{}
	for shard, it := range its {
		for it != nil {
			out, err := ss.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			if err != nil {
				t.Fatalf("shard %s: %v", shard, err)
			}
			for _, r := range out.Records {
				e, ok := h.store.WebhookEvent(local.ConvertRecord(r, arn))
				if !ok || e.SpaceID != s.ID || e.Type == space.EventSpaceRegistered || e.Type == space.EventSpaceStatusChanged {
					continue
				}
				body, err := webhook.Body(e.Type, e.At, e.Data)
				if err != nil {
					t.Fatal(err)
				}
				if bad := validator.Webhook(string(e.Type), body); bad != nil {
					t.Errorf("%s does not follow openapi.yaml: %v\n%s", e.Type, bad, body)
				}
				var b struct {
					Data struct {
						ThresholdDays int       `json:"threshold_days"`
						NotAfter      time.Time `json:"not_after"`
						To            string    `json:"to"`
					} `json:"data"`
				}
				if err := json.Unmarshal(body, &b); err != nil {
					t.Fatal(err)
				}
				key := string(e.Type)
				switch e.Type {
				case space.EventSupportEnding:
					key += fmt.Sprintf(" %d", b.Data.ThresholdDays)
				case space.EventCertificateExpiring:
					key += fmt.Sprintf(" %d until %s", b.Data.ThresholdDays, b.Data.NotAfter.Format(time.DateOnly))
				case space.EventSpaceVersionChanged:
					key += " to " + b.Data.To
				}
				got[key]++
			}
			if len(out.Records) == 0 {
				break
			}
			it = out.NextShardIterator
		}
	}
	return got, h.get(s.ID).Version - s.Version
}
