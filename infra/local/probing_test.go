package local

import (
	"strings"
	"testing"
	"time"

	"spaces/infra/staticminter"
	"spaces/infra/testcluster"
	"spaces/infra/testwait"
	"spaces/shared/kubecred"
	"spaces/shared/space"
)

// The local stack probes on its own: a registered space with a test
// cluster behind it becomes active, one without credentials inactive with
// CredentialsUnavailable.
func TestStackProbes(t *testing.T) {
	cluster := testcluster.NewForTest(t)
	minter := &staticminter.Static{Lookup: func(s space.Space) (creds kubecred.Credentials, ok bool) {
		if s.Config["clusterName"] == "reachable" {
			return cluster.Credentials(), true
		}
		return creds, false
	}}
	st := startWith(t, Config{
		Probing: ProbingConfig{Interval: time.Second, Minter: minter},
	})
	org := "acme"
	acct, err := st.Service.CreateAccount(t.Context(), org, space.NewAccountInput{Provider: space.AWS, Name: "a",
		Connection: map[string]string{"roleArn": "arn:aws:iam::123456789012:role/spaces"}})
	if err != nil {
		t.Fatal(err)
	}
	acct.Status, acct.Version = space.AccountReady, acct.Version+1 // as a verification would
	if err := st.Service.Store.(space.AccountSaver).SaveAccount(t.Context(), acct); err != nil {
		t.Fatal(err)
	}
	reg := func(name string) space.Space {
		s, _, err := st.Service.Register(t.Context(), org, space.RegisterInput{Provider: space.AWS, SpaceType: space.TypeKubernetes,
			CloudAccountID: acct.ID, Config: space.Config{"clusterName": name, "region": "us-east-1"}}, "")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	up, down := reg("reachable"), reg("unreachable")
	if err := st.ProbeQueue.ProbeRegistered(t.Context(), up); err != nil {
		t.Fatal(err)
	}
	wait := func(id string, status space.Status, reason string) {
		t.Helper()
		var s space.Space
		if err := testwait.UntilEvery(testwait.Timeout, 100*time.Millisecond, func() bool {
			var err error
			if s, err = st.Service.Get(t.Context(), org, id); err != nil {
				t.Fatal(err)
			}
			return s.Status == status && s.Probe.Reason == reason
		}); err != nil {
			t.Fatalf("space %s: %s %q (%s) %s, want %s %q", s.Name, s.Status, s.Probe.Reason, s.Probe.Message, err, status, reason)
		}
	}
	wait(up.ID, space.Active, "")
	wait(down.ID, space.Inactive, space.ReasonCredentialsUnavailable)
	s, _ := st.Service.Get(t.Context(), org, down.ID)
	if !strings.Contains(s.Probe.Message, down.ID) {
		t.Errorf("message %q", s.Probe.Message)
	}
}
