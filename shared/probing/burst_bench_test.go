package probing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/awslabs/goformation/v7/intrinsics"
	"github.com/google/uuid"

	"spaces"
	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/infra/minttest"
	"spaces/infra/simcloud"
	"spaces/infra/testcluster"
	"spaces/shared/awsclient"
	"spaces/shared/kubecred"
	"spaces/shared/kubeprobe"
	"spaces/shared/probing"
	"spaces/shared/space"
	"spaces/shared/wiring"
	"spaces/shared/wiring/parts"
)

// burstRegistrations is the burst the template's on-demand caps must let
// through: this many registrations within one minute
// (TestTemplateFitsRegistrationBurst, BENCHMARKS.md "Registration burst").
const burstRegistrations = 2000

// BenchmarkRegistrationBurst measures the DynamoDB units a burst of
// burstRegistrations registrations consumes on the production path, by
// the emulator's unit counts (awscost.Meter, as BenchmarkProbingCost):
// each registration as the catalog makes it (space.Service.Register with an
// Idempotency-Key, the cluster check by the production minter against the
// simulated cloud, which the discovery function runs) into the real store,
// then each new space's immediate probe ("registered") by the prober built
// by shared/wiring, against TLS test clusters. The probe index's units are
// counted from the index itself: every entry that appears, goes or changes
// is one index write (each is far under 1 KB), and DynamoDB writes an
// index only when a table write changes what it projects
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations.Writes).
//
//	GOFLAGS=-modfile=$(make -s overlay) go test -run '^$' -bench RegistrationBurst -benchtime 1x -timeout 30m ./shared/probing
func BenchmarkRegistrationBurst(b *testing.B) {
	for b.Loop() {
		m := measureBurst(b, burstRegistrations)
		n := float64(burstRegistrations)
		b.ReportMetric(m.register.TotalWRU()/n, "table-wru/registration")
		b.ReportMetric(m.probe.TotalWRU()/n, "table-wru/first-probe")
		b.ReportMetric(m.register.TotalRRU()/n, "table-rru/registration")
		b.ReportMetric(m.probe.TotalRRU()/n, "table-rru/first-probe")
		b.ReportMetric(float64(m.indexRegister)/n, "index-wu/registration")
		b.ReportMetric(float64(m.indexProbe)/n, "index-wu/first-probe")
		b.ReportMetric(m.register.Requests["DynamoDB TransactWriteItems"]/n, "transactions/registration")
		// What the burst needs each second of its minute, not counting
		// burst credit.
		b.ReportMetric(math.Ceil((m.register.TotalWRU()+m.probe.TotalWRU())/60), "table-wcu-needed")
		b.ReportMetric(math.Ceil((m.register.TotalRRU()+m.probe.TotalRRU())/60), "table-rcu-needed")
		b.ReportMetric(math.Ceil(float64(m.indexRegister+m.indexProbe)/60), "index-wcu-needed")
		b.ReportMetric(0, "ns/op")
	}
}

// burst is what one burst consumed: the table's units of the
// registrations and of their first probes, and the index writes of each.
type burst struct {
	register, probe           awscost.Usage
	indexRegister, indexProbe int
}

func measureBurst(b testing.TB, n int) burst {
	ctx := context.Background()
	env := emulatortest.Start(b)
	meter := awscost.New()
	// Space items pass 1 KB: their writes are sized by DynamoDB's rule.
	meter.SizeWith(awsclient.DynamoDB(env.Config, env.Endpoint))
	a := parts.AWS{Config: meter.Instrument(env.Config), Endpoint: env.Endpoint}
	table := env.Name(b, "SpacesTable")
	store := a.Store(table)
	sc := simcloud.StartForTest(b, simcloud.Options{})
	minter := sc.Minter(store)

	org := "org-" + uuid.NewString()[:8]
	svc := &space.Service{Store: store, Now: time.Now, NewID: uuid.NewString, StaleAfter: space.DefaultStaleAfter,
		Clusters: minter, Verifier: minter, Trust: minter.Trust}
	acct, err := svc.CreateAccount(ctx, org, space.NewAccountInput{Provider: space.AWS, Name: "burst",
		Connection: map[string]string{"roleArn": minttest.RoleARN}})
	if err != nil {
		b.Fatal(err)
	}
	if err := sc.ApplySetup(acct); err != nil {
		b.Fatal(err)
	}
	if acct, err = svc.VerifyAccount(ctx, org, acct.ID); err != nil || !acct.Ready() {
		b.Fatalf("verify the account: %v (%s)", err, acct.Status)
	}
	ca, err := testcluster.NewCA()
	if err != nil {
		b.Fatal(err)
	}
	var clusters []*testcluster.Cluster
	for range 8 {
		// Any minted token is accepted without its review: what is counted
		// is DynamoDB's, and a review's round trip to the simulated STS
		// times out on a busy machine.
		clusters = append(clusters, testcluster.NewForTest(b, testcluster.WithCA(ca),
			testcluster.WithTokenCheck(func(context.Context, string) bool { return true })))
	}
	for i := range n {
		backing := clusters[i%len(clusters)]
		cl := minttest.Cluster(space.AWS, fmt.Sprintf("burst-%04d", i), backing.URL(), backing.CAPEM())
		cl.Backend = "burst"
		sc.AddCluster(cl)
	}
	// The index as it is, read without the meter.
	raw := awsclient.DynamoDB(env.Config, env.Endpoint)
	index := func() map[string]string {
		out := map[string]string{}
		for s := range store.ProbeShards() {
			in := &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String("probe-digest"),
				KeyConditionExpression:    aws.String("probe_shard = :s"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: fmt.Sprintf("%02d", s)}}}
			for p := dynamodb.NewQueryPaginator(raw, in); p.HasMorePages(); {
				page, err := p.NextPage(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for _, it := range page.Items {
					// What the index holds of an item: the keys and the
					// projected digest (template.yaml; the emulator answers
					// with every attribute).
					out[fmt.Sprint(it["pk"], it["sk"])] = fmt.Sprint(it["probe_shard"], it["pd"])
				}
			}
		}
		return out
	}
	changed := func(before, after map[string]string) int {
		d := 0
		for k, v := range after {
			if before[k] != v {
				d++
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				d++
			}
		}
		return d
	}

	var m burst
	before := index()
	meter.Take()
	ids := make([]space.Space, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s, _, err := svc.Register(ctx, org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
				CloudAccountID: acct.ID, Config: minttest.Config(space.AWS, fmt.Sprintf("burst-%04d", i))}, uuid.NewString())
			if err != nil {
				b.Error(err)
			}
			ids[i] = s
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	m.register = meter.Take()
	registered := index()
	m.indexRegister = changed(before, registered)
	if len(registered)-len(before) != n {
		b.Fatalf("the index gained %d entries for %d registrations", len(registered)-len(before), n)
	}

	checker := &kubeprobe.Prober{MaxTransports: 4 * len(clusters), Timeout: time.Minute}
	b.Cleanup(checker.Close)
	p := wiring.Prober(a, wiring.ProberSettings{
		Common:     parts.Common{Table: table, StaleAfter: space.DefaultStaleAfter},
		ProbeQueue: env.Resources["ProbeQueue"].URL, EventBus: env.Name(b, "EventBus"),
		Interval: space.DefaultProbeInterval,
	}, kubecred.Minter(minter), checker, discardLogger())
	// Every first probe must succeed: a successful one writes the most
	// (its transition and history item in one transaction), and on this
	// shared machine a busy minute must not turn probes into timeouts.
	p.Timeout = time.Minute
	probed := 0
	for start := 0; start < n; start += 50 {
		var batch []probing.Delivery
		for _, s := range ids[start:min(start+50, n)] {
			msg := probing.Message{OrgID: s.OrgID, ID: s.ID, Kind: probing.KindRegistered}
			batch = append(batch, probing.Delivery{MessageID: s.ID, Body: msg.Encode(), ReceiveCount: 1})
		}
		if failed := p.HandleBatch(ctx, batch); len(failed) > 0 {
			b.Fatalf("first probes failed: %v", failed)
		}
		probed += len(batch)
	}
	m.probe = meter.Take()
	m.indexProbe = changed(registered, index())
	for _, s := range ids {
		got, err := store.GetSpace(ctx, s.OrgID, s.ID)
		if err != nil || got.Status != space.Active {
			b.Fatalf("space %s is %s after its first probe (%s): %v", s.ID, got.Status, got.Probe.Reason, err)
		}
	}
	b.Logf("%d registrations, %d first probes; requests: registrations %v, probes %v", n, probed, m.register.Requests, m.probe.Requests)
	return m
}

// TestTemplateFitsRegistrationBurst measures, as BenchmarkRegistrationBurst
// does but on 100 registrations, the units each registration and its first
// probe consume, and checks that the on-demand table's caps (its
// OnDemandThroughput and every index's, through their parameters' defaults)
// let burstRegistrations of them through in one minute: the table's reads
// and writes and the probe index's writes (each index is capped alike). No
// capacity is reserved for it: an on-demand table serves up to its caps
// (a new one at least 4,000 writes and 12,000 reads a second).
func TestTemplateFitsRegistrationBurst(t *testing.T) {
	const n = 100
	m := measureBurst(t, n)
	perMinute := float64(burstRegistrations) / n / 60
	needRead := (m.register.TotalRRU() + m.probe.TotalRRU()) * perMinute
	needWrite := (m.register.TotalWRU() + m.probe.TotalWRU()) * perMinute
	needIndexWrite := float64(m.indexRegister+m.indexProbe) * perMinute
	js, err := intrinsics.ProcessYAML(spaces.Template, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	type caps struct{ MaxReadRequestUnits, MaxWriteRequestUnits any }
	var tpl struct {
		Parameters map[string]struct{ Default any }
		Resources  map[string]struct {
			Properties struct {
				BillingMode            string
				OnDemandThroughput     *caps
				GlobalSecondaryIndexes []struct {
					IndexName          string
					OnDemandThroughput *caps
				}
			}
		}
	}
	if err := json.Unmarshal(js, &tpl); err != nil {
		t.Fatal(err)
	}
	value := func(what string, v any) float64 {
		t.Helper()
		if ref, ok := v.(map[string]any); ok {
			v = tpl.Parameters[fmt.Sprint(ref["Ref"])].Default
		}
		got, err := strconv.ParseFloat(fmt.Sprint(v), 64)
		if err != nil {
			t.Fatalf("%s %v: %v", what, v, err)
		}
		return got
	}
	table := tpl.Resources["SpacesTable"].Properties
	if table.BillingMode != "PAY_PER_REQUEST" || table.OnDemandThroughput == nil {
		t.Fatalf("SpacesTable: %s with caps %v, want PAY_PER_REQUEST with OnDemandThroughput", table.BillingMode, table.OnDemandThroughput)
	}
	check := func(what string, cap, need float64) {
		t.Logf("%s: the burst needs %.1f units a second, the cap is %v", what, need, cap)
		if cap < math.Ceil(need) {
			t.Errorf("%s: cap %v, but %d registrations a minute need %.1f units a second", what, cap, burstRegistrations, need)
		}
	}
	check("table reads", value("table MaxReadRequestUnits", table.OnDemandThroughput.MaxReadRequestUnits), needRead)
	check("table writes", value("table MaxWriteRequestUnits", table.OnDemandThroughput.MaxWriteRequestUnits), needWrite)
	for _, ix := range table.GlobalSecondaryIndexes {
		if ix.OnDemandThroughput == nil {
			t.Errorf("index %s has no OnDemandThroughput", ix.IndexName)
			continue
		}
		check("index "+ix.IndexName+" writes", value(ix.IndexName+" MaxWriteRequestUnits", ix.OnDemandThroughput.MaxWriteRequestUnits), needIndexWrite)
	}
}
