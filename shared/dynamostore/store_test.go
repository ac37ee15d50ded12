package dynamostore_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/infra/awscost"
	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/kmsseal"
	"spaces/shared/space"
)

// fixture is one test's table, store and org with an AWS account.
type fixture struct {
	store   *dynamostore.Store
	db      *dynamodb.Client
	table   string
	org     string
	account space.CloudAccount
}

func newFixture(t testing.TB, opts ...dynamostore.Option) *fixture {
	t.Helper()
	env := emulatortest.Start(t)
	db := awsclient.DynamoDB(env.Config, env.Endpoint)
	table := env.Name(t, "SpacesTable")
	// Webhook secrets are sealed by the template's key in the emulator's KMS.
	sealer := kmsseal.Sealer{KMS: awsclient.KMS(env.Config, env.Endpoint), KeyID: env.Name(t, "WebhookSecretsKey")}
	opts = append([]dynamostore.Option{dynamostore.WithSealer(sealer)}, opts...)
	f := &fixture{store: dynamostore.New(db, table, opts...), db: db, table: table, org: uuid.NewString()}
	f.account = f.createAccount(t, f.org, space.AWS)
	return f
}

var now = time.Date(2025, 11, 30, 12, 0, 0, 123456789, time.UTC)

func (f *fixture) createAccount(t testing.TB, org string, p space.Provider) space.CloudAccount {
	t.Helper()
	a := space.CloudAccount{
		ID: uuid.NewString(), OrgID: org, Provider: p, Name: string(p) + " account",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": "ext-1"},
		Status:     space.AccountReady, CreatedAt: now, Version: 1,
	}
	if err := f.store.CreateAccount(t.Context(), a); err != nil {
		t.Fatalf("CreateAccount: %v", err)
	}
	return a
}

// newSpace builds a valid AWS space on the fixture's account for cluster n.
func (f *fixture) newSpace(n int) space.Space {
	return space.NewSpace(uuid.NewString(), f.org, space.RegisterInput{
		Provider: space.AWS, SpaceType: space.TypeKubernetes, CloudAccountID: f.account.ID,
		Config: space.Config{"clusterName": "cluster-" + strconv.Itoa(n), "region": "us-east-1"},
	}, now)
}

func (f *fixture) register(t testing.TB, s space.Space) space.Space {
	t.Helper()
	if err := f.store.Register(t.Context(), s, space.Idempotency{}); err != nil {
		t.Fatalf("Register %s: %v", s.ID, err)
	}
	return s
}

// raw reads an item as stored.
func (f *fixture) raw(t testing.TB, org, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "ORG#" + org}, "sk": &types.AttributeValueMemberS{Value: sk},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func (f *fixture) spaceCount(t testing.TB, accountID string) string {
	t.Helper()
	item := f.raw(t, f.org, "ACCOUNT#"+accountID)
	n, ok := item["space_count"].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("account %s has no space_count: %v", accountID, item)
	}
	return n.Value
}

// itemCount counts every item of the table.
func (f *fixture) itemCount(t testing.TB) int32 {
	t.Helper()
	var total int32
	in := &dynamodb.ScanInput{TableName: aws.String(f.table), Select: types.SelectCount}
	for {
		out, err := f.db.Scan(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		total += out.Count
		if out.LastEvaluatedKey == nil {
			return total
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func wantKind(t testing.TB, err error, k space.Kind) *space.Error {
	t.Helper()
	var e *space.Error
	if !errors.As(err, &e) || e.Kind != k {
		t.Fatalf("error %v (kind %v), want kind %v", err, space.KindOf(err), k)
	}
	return e
}

func ptr[T any](v T) *T { return &v }

func TestSpaceRoundTrip(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()

	// Every field set, including every probe pointer.
	full := f.newSpace(1)
	full.Name = "prod-eu"
	full.Status = space.Active
	full.Probe = space.Probe{
		Reason: space.ReasonTimeout, Message: "no answer in 5s", LatencyMS: 5000, ConsecutiveFailures: 2,
		LastProbeAt: ptr(now.Add(time.Minute)), LastSuccessAt: ptr(now.Add(time.Second)),
		LastTransitionAt: ptr(now.Add(2 * time.Second)),
		ServerVersion:    &space.ServerVersion{GitVersion: "v1.31.2-eks-1234", Platform: "linux/arm64"},
	}
	// Nil pointers and zero values stay nil and zero.
	bare := f.newSpace(2)
	synthetic := f.newSpace(3)
	synthetic.Synthetic = true

	for _, s := range []space.Space{full, bare, synthetic} {
		f.register(t, s)
		got, err := f.store.GetSpace(ctx, f.org, s.ID)
		if err != nil {
			t.Fatalf("GetSpace: %v", err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, s)
		}
	}
	if got := f.spaceCount(t, f.account.ID); got != "3" {
		t.Errorf("space_count %s, want 3", got)
	}

	// The item layout other components read (stream, probe index).
	item := f.raw(t, f.org, "SPACE#"+full.ID)
	for _, attr := range []string{"id", "org_id", "cloud_account_id", "space_type", "created_at", "probe", "config", "version"} {
		if _, ok := item[attr]; !ok {
			t.Errorf("space item has no %s", attr)
		}
	}
	if sh, ok := item["probe_shard"].(*types.AttributeValueMemberS); !ok || len(sh.Value) != 2 {
		t.Errorf("probe_shard %v", item["probe_shard"])
	}
	if _, ok := f.raw(t, f.org, "SPACE#"+synthetic.ID)["probe_shard"]; ok {
		t.Error("a synthetic space is in the probe index")
	}
	claim := f.raw(t, f.org, "CLAIM#"+full.Identity())
	if id, _ := claim["space_id"].(*types.AttributeValueMemberS); id == nil || id.Value != full.ID {
		t.Errorf("claim %v", claim)
	}

	// Another org never sees it.
	if _, err := f.store.GetSpace(ctx, uuid.NewString(), full.ID); space.KindOf(err) != space.KindNotFound {
		t.Errorf("GetSpace from another org: %v", err)
	}
	if _, err := f.store.GetSpace(ctx, f.org, uuid.NewString()); space.KindOf(err) != space.KindNotFound {
		t.Errorf("GetSpace of an unknown id: %v", err)
	}
}

func TestUpdateSpace(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	s := f.register(t, f.newSpace(1))

	next, _ := space.ApplyProbe(s, space.Outcome{At: now.Add(time.Minute), Latency: 42 * time.Millisecond,
		Version: &space.ServerVersion{GitVersion: "v1.31.0", Platform: "linux/amd64"}})
	next.Name = "renamed"
	next.UpdatedAt = now.Add(time.Minute)
	next.Version++
	set := func(to space.Space) func(space.Space) (space.Space, error) {
		return func(space.Space) (space.Space, error) { return to, nil }
	}
	if _, err := f.store.UpdateSpace(ctx, f.org, s.ID, space.Update[space.Space]{At: next.UpdatedAt, Apply: set(next)}); err != nil {
		t.Fatalf("UpdateSpace: %v", err)
	}
	got, err := f.store.GetSpace(ctx, f.org, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, next) {
		t.Errorf("after save:\n got %#v\nwant %#v", got, next)
	}
	shard := f.raw(t, f.org, "SPACE#"+s.ID)["probe_shard"]
	if shard == nil {
		t.Error("UpdateSpace dropped probe_shard")
	}

	// A stale writer (If-Match the old version 1) is refused and changes
	// nothing.
	stale := s
	stale.Status = space.Inactive
	e := wantKind(t, errOf(f.store.UpdateSpace(ctx, f.org, s.ID, space.Update[space.Space]{IfVersion: 1, At: now, Apply: set(stale)})), space.KindPreconditionFailed)
	if !strings.Contains(e.Message, "version 2") {
		t.Errorf("message %q", e.Message)
	}
	if again, _ := f.store.GetSpace(ctx, f.org, s.ID); !reflect.DeepEqual(again, next) {
		t.Errorf("a refused save changed the space: %#v", again)
	}

	// Unknown spaces are not created by an update, even one that thinks
	// it read them.
	ghost := f.newSpace(9)
	wantKind(t, errOf(f.store.UpdateSpace(ctx, f.org, ghost.ID, space.Update[space.Space]{At: now, Read: &ghost, Apply: set(ghost)})), space.KindNotFound)
	if item := f.raw(t, f.org, "SPACE#"+ghost.ID); item != nil {
		t.Errorf("UpdateSpace created %v", item)
	}
}

func TestDeregister(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	s := f.register(t, f.newSpace(1))
	at := now.Add(time.Hour)

	wantKind(t, errOf(f.store.Deregister(ctx, f.org, s.ID, 7, at, "test")), space.KindPreconditionFailed)
	wantKind(t, errOf(f.store.Deregister(ctx, uuid.NewString(), s.ID, 0, at, "test")), space.KindNotFound)

	got, err := f.store.Deregister(ctx, f.org, s.ID, 1, at, "test")
	if err != nil {
		t.Fatalf("Deregister: %v", err)
	}
	want := s
	want.DeletedAt, want.DeletedBy, want.UpdatedAt, want.Version = &at, "test", at, 2
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deregistered:\n got %#v\nwant %#v", got, want)
	}
	item := f.raw(t, f.org, "SPACE#"+s.ID)
	if item == nil || item["deleted_at"] == nil || item["deleted_by"] == nil || item["probe_shard"] != nil {
		t.Errorf("stored item after deregistration: %v", item)
	}
	if claim := f.raw(t, f.org, "CLAIM#"+s.Identity()); claim != nil {
		t.Errorf("claim left: %v", claim)
	}
	if n := f.spaceCount(t, f.account.ID); n != "0" {
		t.Errorf("space_count %s", n)
	}

	wantKind(t, errOf(f.store.GetSpace(ctx, f.org, s.ID)), space.KindNotFound)
	wantKind(t, errOf(f.store.Deregister(ctx, f.org, s.ID, 0, at, "test")), space.KindNotFound)
	wantKind(t, errOf(f.store.Deregister(ctx, f.org, s.ID, 2, at, "test")), space.KindNotFound)
	late := want
	late.DeletedAt = nil
	late.Version = 2
	wantKind(t, errOf(f.store.UpdateSpace(ctx, f.org, s.ID, space.Update[space.Space]{At: at, Read: &late,
		Apply: func(cur space.Space) (space.Space, error) { cur.Status = space.Active; return cur, nil }})), space.KindNotFound)

	// Without a version, the space as deleted is returned.
	s2 := f.register(t, f.newSpace(2))
	got2, err := f.store.Deregister(ctx, f.org, s2.ID, 0, at, "test")
	if err != nil {
		t.Fatal(err)
	}
	if got2.DeletedAt == nil || !got2.DeletedAt.Equal(at) || got2.Version != 2 || got2.ID != s2.ID {
		t.Errorf("deregistered without version: %#v", got2)
	}
}

func errOf[T any](_ T, err error) error { return err }

func errOf2[A, B any](_ A, _ B, err error) error { return err }

func TestAccounts(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()

	got, err := f.store.GetAccount(ctx, f.org, f.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f.account) {
		t.Errorf("account round trip:\n got %#v\nwant %#v", got, f.account)
	}
	dup := f.account
	dup.Name = "other"
	wantKind(t, f.store.CreateAccount(ctx, dup), space.KindConflict)
	if got, _ := f.store.GetAccount(ctx, f.org, f.account.ID); got.Name != f.account.Name {
		t.Errorf("a refused create changed the account: %#v", got)
	}
	wantKind(t, errOf(f.store.GetAccount(ctx, uuid.NewString(), f.account.ID)), space.KindNotFound)
	wantKind(t, f.store.DeleteAccount(ctx, f.org, uuid.NewString()), space.KindNotFound)
	wantKind(t, f.store.DeleteAccount(ctx, uuid.NewString(), f.account.ID), space.KindNotFound)

	// An account in use cannot be deleted; once its space is gone it can.
	s := f.register(t, f.newSpace(1))
	e := wantKind(t, f.store.DeleteAccount(ctx, f.org, f.account.ID), space.KindConflict)
	if e.Message != "the cloud account is used by 1 registered space" {
		t.Errorf("message %q", e.Message)
	}
	if _, err := f.store.GetAccount(ctx, f.org, f.account.ID); err != nil {
		t.Fatalf("a refused delete removed the account: %v", err)
	}
	if got, _ := f.store.GetAccount(ctx, f.org, f.account.ID); got.Version != 1 {
		t.Errorf("counting spaces changed the account's version to %d", got.Version)
	}
	if _, err := f.store.Deregister(ctx, f.org, s.ID, 0, now, "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.store.DeleteAccount(ctx, f.org, f.account.ID); err != nil {
		t.Fatalf("DeleteAccount after deregistration: %v", err)
	}
	wantKind(t, errOf(f.store.GetAccount(ctx, f.org, f.account.ID)), space.KindNotFound)
	wantKind(t, f.store.DeleteAccount(ctx, f.org, f.account.ID), space.KindNotFound)
}

func TestAWSErrorsAreMapped(t *testing.T) {
	env := emulatortest.Start(t)
	ctx := t.Context()

	// Nothing listens on port 1: the store is unavailable, cause kept.
	cfg := env.Config.Copy()
	cfg.RetryMaxAttempts = 1
	down := dynamostore.New(awsclient.DynamoDB(cfg, "http://127.0.0.1:1"), "t")
	e := wantKind(t, errOf(down.GetSpace(ctx, uuid.NewString(), uuid.NewString())), space.KindUnavailable)
	if e.Err == nil || strings.Contains(e.Message, "127.0.0.1") {
		t.Errorf("cause %v, message %q", e.Err, e.Message)
	}

	// A missing table is a bug, not an outage.
	missing := dynamostore.New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Prefix+"NoSuchTable")
	e = wantKind(t, errOf(missing.GetSpace(ctx, uuid.NewString(), uuid.NewString())), space.KindInternal)
	if !strings.Contains(e.Err.Error(), "ResourceNotFoundException") {
		t.Errorf("cause %v", e.Err)
	}

	// A canceled request is reported as unavailable.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	wantKind(t, errOf(missing.GetAccount(canceled, uuid.NewString(), uuid.NewString())), space.KindUnavailable)
}

// meteredFixture is a fixture on the emulator whose every request is
// counted (awscost), with an org and a ready AWS account: the cost
// benchmarks' starting point.
func meteredFixture(b testing.TB) (*fixture, *awscost.Meter) {
	env := emulatortest.Start(b)
	meter := awscost.New()
	db := awsclient.DynamoDB(meter.Instrument(env.Config), env.Endpoint)
	f := &fixture{store: dynamostore.New(db, env.Name(b, "SpacesTable")), db: db,
		table: env.Name(b, "SpacesTable"), org: uuid.NewString()}
	f.account = f.createAccount(b, f.org, space.AWS)
	return f, meter
}
