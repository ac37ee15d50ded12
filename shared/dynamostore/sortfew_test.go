package dynamostore

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"spaces/infra/emulator/emulatortest"
	"spaces/shared/awsclient"
	"spaces/shared/space"
)

// A selector in another order reads and sorts its spaces itself only when
// its requirements take at most sortFewMax spaces, found within
// maxSortFewEntries entries; past either bound sortFew gives up (and the
// listing filters the sort index), and the listing is the same either
// way.
func TestSortFewBounds(t *testing.T) {
	env := emulatortest.Start(t)
	s := New(awsclient.DynamoDB(env.Config, env.Endpoint), env.Name(t, "SpacesTable"))
	ctx := t.Context()
	at := time.Date(2025, 11, 30, 12, 0, 0, 0, time.UTC)
	org := uuid.NewString()
	acct := space.CloudAccount{ID: uuid.NewString(), OrgID: org, Provider: space.AWS, Name: "aws",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces", "externalId": "ext-1"},
		Status:     space.AccountReady, CreatedAt: at, Version: 1}
	if err := s.CreateAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		labels := space.Labels{"team": "a"}
		if i < 5 {
			labels["env"] = "prod"
		}
		sp := space.NewSpace(uuid.NewString(), org, space.RegisterInput{Name: fmt.Sprintf("c-%d", 9-i), Provider: space.AWS,
			SpaceType: space.TypeKubernetes, CloudAccountID: acct.ID, Labels: labels,
			Config: space.Config{"clusterName": fmt.Sprintf("c%d", i), "region": "us-east-1"}}, at)
		if err := s.Register(ctx, sp, space.Idempotency{}); err != nil {
			t.Fatal(err)
		}
	}
	defer func(n, e int) { sortFewMax, maxSortFewEntries = n, e }(sortFewMax, maxSortFewEntries)
	sel, _ := space.ParseSelector("label_selector", "env=prod,team=a")
	q := space.Query{Page: space.Page{Limit: 2}, Sort: space.SortName, Selector: sel,
		Keep: func(x space.Space) bool { return sel.Matches(x.Labels) }} // as space.Service sets it
	for _, c := range []struct {
		name        string
		most, reads int
		sorts       bool
	}{
		{"few", 5, 1000, true},
		{"more spaces than sortFewMax", 4, 1000, false},
		{"more entries than maxSortFewEntries", 5, 3, false},
	} {
		sortFewMax, maxSortFewEntries = c.most, c.reads
		_, _, ok, err := s.sortFew(ctx, org, sortIndexes[space.SortName], q, nil, nil, map[string]types.AttributeValue{})
		if err != nil || ok != c.sorts {
			t.Errorf("%s: sortFew ok=%v (%v), want %v", c.name, ok, err, c.sorts)
		}
		var names []string
		for p := q; ; {
			page, next, err := s.ListSpaces(ctx, org, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, sp := range page {
				names = append(names, sp.Name)
			}
			if next == "" {
				break
			}
			p.After = next
		}
		if fmt.Sprint(names) != "[c-5 c-6 c-7 c-8 c-9]" {
			t.Errorf("%s: listed %v", c.name, names)
		}
	}
}
