package dynamostore_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// itemSize is an item's size as DynamoDB bills it: each attribute's name
// and value in UTF-8 bytes, a number about half its digits plus one, a
// list or map 3 bytes plus 1 per element (and a map its keys)
// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html).
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(strings.TrimLeft(v.Value, "-0"))+1)/2 + 1
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// TestAgentReportItemSize: the largest namespaces report the API takes (a
// body of space.MaxNamespacesReportBody, 1,000 namespaces) is stored as an
// AGENTNS item no larger than that body, within DynamoDB's 400 KB; the
// AGENT item, which every lease renewal rewrites, stays within one write
// unit while no work waits. The figures are logged (go test -v): a list
// write is a transaction, twice the item's write units, and happens only
// when the list changed (at most once a space.ReportInterval unasked).
func TestAgentReportItemSize(t *testing.T) {
	f := newFixture(t)
	s, cred := f.agentSpace(t)
	if _, err := f.store.RenewLease(t.Context(), s.ID, cred.Hash(), space.LeaseReport{AgentVersion: "v1.2.3",
		ServerVersion: space.ServerVersion{GitVersion: "v1.31.2-eks-1234567", Platform: "linux/amd64"}}, now); err != nil {
		t.Fatal(err)
	}
	// 1,000 namespaces of 63-character names, with labels padding the
	// body up to its bound.
	var r space.NamespacesReport
	for i := range space.MaxReportedNamespaces {
		name := fmt.Sprintf("%s-%04d", strings.Repeat("n", 58), i)
		r.Items = append(r.Items, space.ReportedNamespace{Name: name, Phase: "Active", CreatedAt: "2026-12-01T00:00:00Z",
			Labels: map[string]string{"kubernetes.io/metadata.name": name}})
	}
	body := func() int {
		b, _ := json.Marshal(map[string]any{"items": r.Items, "creates": []any{}})
		return len(b)
	}
	for i, left := 0, space.MaxNamespacesReportBody-200-body(); ; i = (i + 1) % len(r.Items) {
		k, v := fmt.Sprintf("pad-%d", len(r.Items[i].Labels)), strings.Repeat("v", 20)
		if left -= len(fmt.Sprintf(`,%q:%q`, k, v)); left < 0 {
			break
		}
		r.Items[i].Labels[k] = v
	}
	if body() > space.MaxNamespacesReportBody {
		t.Fatalf("the report is %d bytes, more than the API takes", body())
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := f.store.ReportNamespaces(t.Context(), s.ID, cred.Hash(), r, now); err != nil {
		t.Fatal(err)
	}
	get := func(sk string) map[string]types.AttributeValue {
		out, err := f.db.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "SPACE#" + s.ID}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil || out.Item == nil {
			t.Fatalf("GetItem %s: %v", sk, err)
		}
		return out.Item
	}
	units := func(n int) int { return (n + 1023) / 1024 }
	list, agent := itemSize(get("AGENTNS")), itemSize(get("AGENT"))
	t.Logf("largest report: body %d bytes; AGENTNS item %d bytes = %d write units, a list write (transaction) %d",
		body(), list, units(list), 2*(units(list)+units(agent)))
	t.Logf("AGENT item %d bytes = %d write unit(s) per lease renewal", agent, units(agent))
	if list > body() || list >= 400_000 {
		t.Errorf("the AGENTNS item is %d bytes, want at most the body's %d (and within 400 KB)", list, body())
	}
	if units(agent) != 1 {
		t.Errorf("the AGENT item is %d bytes (%d write units), want one write unit with no work waiting", agent, units(agent))
	}
}
