package dynamostore_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/infra/shapetest"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// The table's attribute names are the json tags of the domain's types
// (dynamostore encodes with the json tag), the same names the API
// answers: the items' shapes are frozen in testdata/items.golden (why:
// package shapetest), so that a renamed tag, a new field or a renamed
// attribute fails here before it changes the stored data.

const itemsGolden = "testdata/items.golden"

// Fixed ids, so that the attributes named after one (an agent's handed
// revision, a counter per account) read the same on every run; itemShapes
// writes them as placeholders.
const (
	shapeOrg     = "0a000000-0000-4000-8000-000000000000"
	shapeAccount = "0a000000-0000-4000-8000-000000000001"
	shapeSpace   = "0a000000-0000-4000-8000-000000000002"
	shapeEnv     = "0a000000-0000-4000-8000-000000000003"
	shapePolicy  = "0a000000-0000-4000-8000-000000000004"
	shapeRev     = "0a000000-0000-4000-8000-000000000005"
	shapeStopped = "0a000000-0000-4000-8000-000000000006"
	shapeJob     = "0a000000-0000-4000-8000-000000000007"
	shapeNS      = "team-a"
)

func filled[T any]() T {
	var v T
	shapetest.Fill(&v)
	return v
}

// TestItemShapes writes every kind of item through the store, with every
// field of the domain values set (shapetest.Fill; the scenario fixes only
// ids, states and what a first write must leave unset), reads the table back
// as stored and compares each kind's attributes and their DynamoDB types
// with testdata/items.golden. It reads twice: once with the space live
// (its agent item is deleted by the deregistration) and once after the
// deregistration and its cascade.
func TestItemShapes(t *testing.T) {
	f := newFixture(t)
	// Written as an API request writes: its stamp on the items the audit
	// trail reads (stamp.go).
	ctx := space.WithStamp(t.Context(), space.Stamp{Subject: "x", RequestID: "x"})
	st := f.store
	at := shapetest.At

	acct := filled[space.CloudAccount]()
	acct.ID, acct.OrgID, acct.Provider, acct.Status = shapeAccount, shapeOrg, space.AWS, space.AccountReady
	must(t, "CreateAccount", st.CreateAccount(ctx, acct))

	sp := filled[space.Space]()
	sp.ID, sp.OrgID, sp.Provider, sp.CloudAccountID = shapeSpace, shapeOrg, space.AWS, shapeAccount
	sp.SpaceType, sp.Status, sp.Connectivity, sp.Synthetic = space.TypeKubernetes, space.Unknown, space.ViaAgent, false
	sp.DeletedAt, sp.DeletedBy, sp.Version = nil, "", 1
	sp.KubernetesVersion = "1.31" // a version that parses is counted (counted_minor, minor_<m>)
	must(t, "Register", st.Register(ctx, sp, space.Idempotency{Key: "key", Hash: "hash", Space: sp}))

	probe := filled[space.Probe]()
	probe.ServerVersion.GitVersion = "v1.32.0" // an upgrade: the counted minor moves
	up, err := st.UpdateSpace(ctx, shapeOrg, shapeSpace, space.Update[space.Space]{At: at.Add(time.Minute),
		Apply: func(s space.Space) (space.Space, error) {
			s.Status, s.Probe, s.Notices = space.Active, probe, filled[space.Notices]()
			return s, nil
		}})
	must(t, "UpdateSpace", err)

	env := filled[space.Environment]()
	env.ID, env.OrgID, env.SpaceID, env.Gate, env.Version = shapeEnv, shapeOrg, shapeSpace, nil, 1
	must(t, "CreateEnvironment", st.CreateEnvironment(ctx, env))
	pol := filled[space.AutoscalerPolicy]()
	pol.ID, pol.OrgID, pol.SpaceID, pol.State, pol.Version = shapePolicy, shapeOrg, shapeSpace, space.PolicyApplied, 1
	must(t, "CreatePolicy", st.CreatePolicy(ctx, pol))

	rev := filled[space.Revision]()
	rev.ID, rev.OrgID, rev.EnvironmentID, rev.SpaceID, rev.State, rev.Version = shapeRev, shapeOrg, shapeEnv, shapeSpace, space.RevisionPending, 1
	must(t, "CreateRevision", st.CreateRevision(ctx, rev))
	stopped := rev
	stopped.ID, stopped.State = shapeStopped, space.RevisionStopped
	must(t, "CreateRevision (stopped)", st.CreateRevision(ctx, stopped))

	job := filled[provisioning.Job]()
	job.ID, job.OrgID, job.Provider, job.CloudAccountID, job.Version = shapeJob, shapeOrg, space.AWS, shapeAccount, 1
	job.Config = space.Config{shapetest.Key: "another cluster"}
	must(t, "CreateJob", st.CreateJob(ctx, job, provisioning.Idempotency{Key: "key", Hash: "hash", JobID: shapeJob}))

	// The agent item, with every attribute its routes write.
	later := at.Add(time.Hour)
	must(t, "PutBootstrap", st.PutBootstrap(ctx, up.After, "bootstrap", later))
	_, err = st.ExchangeBootstrap(ctx, shapeSpace, "bootstrap", "credential", "kube-system-uid/ca-sha256", later, at)
	must(t, "ExchangeBootstrap", err)
	_, err = st.RenewCredential(ctx, shapeSpace, "credential", "credential2", later, at)
	must(t, "RenewCredential", err)
	_, err = st.RenewLease(ctx, shapeSpace, "credential2", space.LeaseReport{AgentVersion: "x", ServerVersion: filled[space.ServerVersion](), Cluster: &space.ClusterBinding{KubeSystemUID: "kube-system-uid", CASHA256: "ca-sha256"}}, at)
	must(t, "RenewLease", err)
	_, err = st.RecordPresence(ctx, shapeSpace, space.Presence{Connected: false, At: at, Version: 1, Reason: "x"})
	must(t, "RecordPresence", err)
	must(t, "WantNamespaces", st.WantNamespaces(ctx, shapeOrg, shapeSpace, at))
	must(t, "RequestNamespace", st.RequestNamespace(ctx, shapeOrg, shapeSpace, space.NamespaceCreate{Name: shapeNS, Labels: map[string]string{shapetest.Key: "x"}}))
	// "other" is asked for too, so that the report below answers a pending
	// create while shapeNS stays pending in the item.
	must(t, "RequestNamespace (other)", st.RequestNamespace(ctx, shapeOrg, shapeSpace, space.NamespaceCreate{Name: "other"}))
	must(t, "HandRevision", st.HandRevision(ctx, rev))
	must(t, "PutBootstrap (a reinstall)", st.PutBootstrap(ctx, up.After, "bootstrap2", later))
	must(t, "ReportNamespaces", st.ReportNamespaces(ctx, shapeSpace, "credential2", space.NamespacesReport{
		Items:   []space.ReportedNamespace{{Name: "x", Phase: "x", Labels: map[string]string{shapetest.Key: "x"}, CreatedAt: at.Format(time.RFC3339)}},
		Creates: []space.CreateOutcome{{Name: "other", Error: "x"}}}, at))

	// The prober's beat of a shard, and (with the deregistration below)
	// the fence entry.
	_, err = st.Beat(ctx, "00", at)
	must(t, "Beat", err)

	hook := filled[space.WebhookEndpoint]()
	hook.OrgID, hook.State, hook.Version, hook.EventTypes = shapeOrg, space.WebhookEnabled, 1, []space.EventType{space.EventSpaceRegistered}
	must(t, "CreateWebhook", st.CreateWebhook(ctx, hook))
	// One attempt of its delivery log.
	attempt := filled[space.DeliveryAttempt]()
	attempt.OrgID, attempt.EndpointID, attempt.At = shapeOrg, hook.ID, at
	must(t, "RecordAttempt", st.RecordAttempt(ctx, attempt))
	// The event it delivered, kept for replay.
	ev := filled[space.StoredEvent]()
	ev.OrgID, ev.EndpointID, ev.Data = shapeOrg, hook.ID, []byte(`{"space_id":"x"}`)
	must(t, "SaveEvent", st.SaveEvent(ctx, ev, at))
	// One attempt of it under way (its place among the endpoint's).
	if _, err := st.HoldAttempt(ctx, hook.ID, "holder", 4, at, at.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}

	// An entry of the org's audit trail.
	entry := filled[space.Activity]()
	entry.OrgID, entry.At = shapeOrg, at
	must(t, "RecordActivity", st.RecordActivity(ctx, entry))

	got := map[string][]string{}
	f.itemShapes(t, got)

	_, err = st.Deregister(ctx, shapeOrg, shapeSpace, 0, later, "x")
	must(t, "Deregister", err)
	_, err = st.GateEnvironment(ctx, shapeOrg, shapeEnv, shapeSpace, filled[space.Gate]())
	must(t, "GateEnvironment", err)
	_, err = st.DetachPolicy(ctx, shapeOrg, shapePolicy, shapeSpace, "x", later)
	must(t, "DetachPolicy", err)
	_, err = st.MarkCascaded(ctx, shapeOrg, shapeSpace, later)
	must(t, "MarkCascaded", err)
	f.itemShapes(t, got)

	shapetest.Golden(t, itemsGolden, `
The shape of every kind of item in the table: an attribute path and its
DynamoDB type per line (<key>: a map key the data chooses; []: a list's
elements; <space id>, <revision id>, <account id>, <name>: the item's own).
Generated by TestItemShapes from the code; regenerate with
  go test ./shared/dynamostore -run TestItemShapes -update
only when the change to the stored data is meant.`,
		`This changes the items the table holds: items already stored keep the old attribute names, which the
code would no longer read (and, for a domain type's json tag, the API's field names change too: see
shared/httpapi's TestAPIShapes). If it is meant, migrate or backfill the stored items (dynamostore.Backfill),
then regenerate with
  go test ./shared/dynamostore -run TestItemShapes -update`, got)
}

// TestItemShapesCoverEveryKey holds TestItemShapes to the package's keys:
// every constant named prefix… or sk… (a sort key, or an attribute name
// the data completes) must begin a kind or an attribute of the golden
// file, so that a new kind of item fails here until the scenario writes
// one.
func TestItemShapesCoverEveryKey(t *testing.T) {
	golden, err := os.ReadFile(itemsGolden)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			d, ok := n.(*ast.GenDecl)
			if !ok || d.Tok != token.CONST {
				return true
			}
			for _, spec := range d.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "prefix") && !strings.HasPrefix(id.Name, "sk") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					found++
					if !coversKey(string(golden), v) {
						t.Errorf("%s: %s = %q begins no kind or attribute of %s: write one such item in TestItemShapes, then -update",
							name, id.Name, v, itemsGolden)
					}
				}
			}
			return false
		})
	}
	if found < 17 {
		t.Errorf("found %d key constants, want the 17 or more of keys.go, agents.go and agentwork.go", found)
	}
}

// coversKey reports whether a section of golden is a kind with key part
// v ("== ORG# SPACE#" for SPACE#) or one of its lines an attribute that
// begins with v.
func coversKey(golden, v string) bool {
	for _, l := range strings.Split(golden, "\n") {
		if kind, ok := strings.CutPrefix(l, "== "); ok && slices.Contains(strings.Fields(kind), v) {
			return true
		}
		if strings.HasPrefix(l, v) {
			return true
		}
	}
	return false
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// itemShapes scans the table and adds each item's shape to its kind's
// lines in got.
func (f *fixture) itemShapes(t *testing.T, got map[string][]string) {
	t.Helper()
	p := dynamodb.NewScanPaginator(f.db, &dynamodb.ScanInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		for _, item := range page.Items {
			s, ok := item["pk"].(*types.AttributeValueMemberS)
			// Keyed by no org or space: the fleet-wide items and an
			// endpoint's delivery log (this fixture writes one endpoint).
			fleetWide := ok && (strings.HasPrefix(s.Value, "FENCE#") || s.Value == "PROBE" || strings.HasPrefix(s.Value, "HOOK#"))
			if !ok || !fleetWide && !strings.Contains(s.Value, shapeOrg) && !strings.Contains(s.Value, shapeSpace) {
				continue // the fixture's own account, in another org
			}
			kind := itemKind(item)
			var lines []string
			walkItem("", &types.AttributeValueMemberM{Value: item}, &lines)
			got[kind] = shapetest.Lines(append(got[kind], lines...))
		}
	}
}

// itemKind names an item by the prefixes of its keys: "ORG# SPACE#",
// "SPACE# HIST#", "WORD# <word>\x01<name>\x01<space id>", "LABEL#
// <key>=<value>\x01<space id>", "LPROB# <key>=<value>\x01<problem
// key>"; a deregistered
// space is "ORG# SPACE# (tombstone)".
func itemKind(item map[string]types.AttributeValue) string {
	prefix := func(k string) string {
		s, _ := item[k].(*types.AttributeValueMemberS)
		if s == nil {
			return "<no " + k + ">"
		}
		if i := strings.Index(s.Value, "#"); i >= 0 {
			return s.Value[:i+1]
		}
		return s.Value
	}
	kind := prefix("pk") + " " + prefix("sk")
	if prefix("pk") == "FENCE#" {
		kind = "FENCE# <deleted_at>#<space id>"
	}
	if prefix("pk") == "ACT#" {
		kind = "ACT# <recorded_at>#<id>"
	}
	if prefix("pk") == "ACTID#" {
		kind = "ACTID# <id>"
	}
	if prefix("pk") == "WORD#" {
		kind = "WORD# <word>\\x01<name>\\x01<space id>"
	}
	if prefix("pk") == "LABEL#" {
		kind = "LABEL# <key>=<value>\\x01<space id>"
	}
	if prefix("pk") == "LPROB#" {
		kind = "LPROB# <key>=<value>\\x01<problem key>"
	}
	if _, ok := item["deleted_at"]; ok && kind == "ORG# SPACE#" {
		kind += " (tombstone)"
	}
	return kind
}

// attrName writes the ids and names an attribute name carries as
// placeholders.
var attrName = strings.NewReplacer(shapeSpace, "<space id>", shapeRev, "<revision id>", shapeAccount, "<account id>",
	shapeNS, "<name>").Replace

func walkItem(path string, v types.AttributeValue, out *[]string) {
	line := func(typ string) {
		if path != "" {
			*out = append(*out, path+" "+typ)
		}
	}
	switch x := v.(type) {
	case *types.AttributeValueMemberM:
		line("M")
		keys := make([]string, 0, len(x.Value))
		for k := range x.Value {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkItem(shapetest.Join(path, attrName(k)), x.Value[k], out)
		}
	case *types.AttributeValueMemberL:
		line("L")
		for _, e := range x.Value {
			walkItem(path+"[]", e, out)
		}
	case *types.AttributeValueMemberS:
		line("S")
	case *types.AttributeValueMemberN:
		line("N")
	case *types.AttributeValueMemberBOOL:
		line("BOOL")
	case *types.AttributeValueMemberNULL:
		line("NULL")
	case *types.AttributeValueMemberB:
		line("B")
	case *types.AttributeValueMemberSS:
		line("SS")
	case *types.AttributeValueMemberNS:
		line("NS")
	case *types.AttributeValueMemberBS:
		line("BS")
	default:
		line("?")
	}
}
