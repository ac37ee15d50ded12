package local

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// TestWebhookEveryEventFromTheStream: a revision stored as deployed,
// failed or stopped, a provisioning job stored as succeeded or failed and
// a cloud account's verification stored as failed each reach a real HTTPS
// receiver once, as its event type, from the table's stream; each body
// follows its schema in openapi.yaml's webhooks section and verifies with
// the Standard Webhooks reference library. Changes that are no event (a
// revision still pending, a job still creating) send nothing, and no body carries a
// manifest, a job's cluster configuration or an account's connection.
func TestWebhookEveryEventFromTheStream(t *testing.T) {
	rc := newHookReceiver(t)
	st := webhookStack(t, rc)
	c := newClient(t, st, "acme")
	types := []string{"revision.deployed", "revision.failed", "revision.stopped",
		"provisioning_job.succeeded", "provisioning_job.failed", "cloud_account.verification_failed"}
	created := c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{"url": rc.srv.URL + "/hooks", "event_types": types}))
	verifier, err := standardwebhooks.NewWebhook(created["secret"].(string))
	if err != nil {
		t.Fatal(err)
	}
	acctID := c.account("aws")
	spaceID := c.must(201, c.do("POST", "/spaces", registerBody("aws", acctID, "evented")))["id"].(string)
	store := st.webhookStore()
	ctx := t.Context()
	now := time.Now().UTC()

	// Secrets that must never travel: a manifest's, a job's configuration,
	// the account's connection.
	const manifestSecret, configSecret = "bWFuaWZlc3Qtc2VjcmV0", "config-secret-cluster"
	revision := func(to space.RevisionState, reason string) string {
		r := space.Revision{ID: uuid.NewString(), OrgID: "acme", EnvironmentID: uuid.NewString(), SpaceID: spaceID, Namespace: "web",
			Manifests: []map[string]any{{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "db"},
				"data": map[string]any{"password": manifestSecret}}},
			State: space.RevisionPending, CreatedAt: now, UpdatedAt: now, Version: 1}
		if err := store.CreateRevision(ctx, r); err != nil {
			t.Fatal(err)
		}
		// Still pending: no event.
		if _, err := store.UpdateRevision(ctx, "acme", r.ID, space.Update[space.Revision]{At: time.Now(), Apply: func(r space.Revision) (space.Revision, error) {
			r.Attempts++
			return r, nil
		}}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.UpdateRevision(ctx, "acme", r.ID, space.Update[space.Revision]{At: time.Now(), Apply: func(r space.Revision) (space.Revision, error) {
			r.State, r.Reason = to, reason
			return r, nil
		}}); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	job := func(cluster string, to provisioning.State) string {
		j := provisioning.Job{ID: uuid.NewString(), OrgID: "acme", Name: cluster, Provider: space.AWS, CloudAccountID: acctID,
			Config: space.Config{"clusterName": configSecret + "-" + cluster, "region": "us-east-1"},
			Spec:   space.ClusterSpec{KubernetesVersion: "1.31", NodePool: space.NodePool{MachineType: "m5.large", Min: 1, Max: 3, Desired: 2}},
			State:  provisioning.Queued, Since: now, Steps: []provisioning.Step{{State: provisioning.Queued, At: now}},
			CreatedAt: now, UpdatedAt: now, Version: 1}
		if err := store.CreateJob(ctx, j, provisioning.Idempotency{}); err != nil {
			t.Fatal(err)
		}
		for _, s := range []provisioning.State{provisioning.Creating, to} {
			if _, err := store.UpdateJob(ctx, "acme", j.ID, space.Update[provisioning.Job]{At: time.Now(), Apply: func(j provisioning.Job) (provisioning.Job, error) {
				j.State, j.Since = s, time.Now().UTC()
				switch s {
				case provisioning.Succeeded:
					j.SpaceID = spaceID
				case provisioning.Failed:
					j.Failure = &provisioning.Failure{Step: provisioning.Creating, Reason: "CloudRefused", Message: "quota exceeded", Retryable: true}
				}
				return j, nil
			}}); err != nil {
				t.Fatal(err)
			}
		}
		return j.ID
	}
	want := map[string]string{ // type: the id its data names
		"revision.deployed":          revision(space.RevisionDeployed, ""),
		"revision.failed":            revision(space.RevisionFailed, "admission webhook denied the request"),
		"revision.stopped":           revision(space.RevisionStopped, space.ReasonSpaceInactive),
		"provisioning_job.succeeded": job("made", provisioning.Succeeded),
		"provisioning_job.failed":    job("refused", provisioning.Failed),
	}
	acct, err := store.GetAccount(ctx, "acme", acctID)
	if err != nil {
		t.Fatal(err)
	}
	acct.Status, acct.StatusReason, acct.StatusMessage, acct.Version = space.AccountFailed, space.ReasonTrustNotOrgBound, "the role trusts any org", acct.Version+1
	if err := store.SaveAccount(ctx, acct); err != nil {
		t.Fatal(err)
	}
	want["cloud_account.verification_failed"] = acctID
	secrets := []string{manifestSecret, configSecret, acct.Connection["roleArn"], acct.Connection["externalId"]}

	eventually(t, "six events at the receiver", func() bool { return len(rc.requests()) >= len(want) })
	seen := map[string]int{}
	for _, h := range checkedHooks(t, rc, verifier) {
		r, b := h.hookRequest, h.body
		seen[b.Type]++
		id := map[bool]string{true: "revision_id"}[strings.HasPrefix(b.Type, "revision.")]
		switch {
		case strings.HasPrefix(b.Type, "provisioning_job."):
			id = "job_id"
		case strings.HasPrefix(b.Type, "cloud_account."):
			id = "cloud_account_id"
		}
		if b.Data[id] != want[b.Type] {
			t.Errorf("%s names %s %v; want %s", b.Type, id, b.Data[id], want[b.Type])
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(string(r.body), s) {
				t.Errorf("%s carries %q:\n%s", b.Type, s, r.body)
			}
		}
		if strings.Contains(string(r.body), "manifests") || strings.Contains(string(r.body), "connection") || strings.Contains(string(r.body), "config") {
			t.Errorf("%s carries a manifest, a configuration or a connection:\n%s", b.Type, r.body)
		}
	}
	for typ := range want {
		if seen[typ] != 1 {
			t.Errorf("%s delivered %d times; want once", typ, seen[typ])
		}
	}
	if len(rc.requests()) != len(want) {
		t.Errorf("%d requests; want %d (a change that is no event was sent)", len(rc.requests()), len(want))
	}
}

// TestWebhookInventoryEventsFromTheStream: a space's stored version change
// and its thresholds stored as announced (as the prober's ApplyProbe
// stores them, space.Announce) reach a real HTTPS receiver once each as
// space.version_changed, space.support_ending and
// space.certificate_expiring, from the table's stream; each body follows
// its schema in openapi.yaml and verifies with the Standard Webhooks
// reference library. A first version (none known before) and a rename
// send nothing. The space is synthetic, so no probe writes it meanwhile;
// the rules and the prober's path over 70 simulated days:
// TestNoticeSteps, TestInventoryEventsOncePerThreshold.
func TestWebhookInventoryEventsFromTheStream(t *testing.T) {
	rc := newHookReceiver(t)
	st := webhookStack(t, rc)
	c := newClient(t, st, "acme")
	types := []string{"space.version_changed", "space.support_ending", "space.certificate_expiring"}
	created := c.must(201, c.do("POST", "/webhook-endpoints", map[string]any{"url": rc.srv.URL + "/hooks", "event_types": types}))
	verifier, err := standardwebhooks.NewWebhook(created["secret"].(string))
	if err != nil {
		t.Fatal(err)
	}
	acctID := c.account("aws")
	spaceID := c.must(201, c.do("POST", "/spaces", map[string]any{"provider": "aws", "space_type": "kubernetes", "cloud_account_id": acctID,
		"synthetic": true, "config": configFor("aws", "inventory")}))["id"].(string)
	store := st.webhookStore()
	update := func(at time.Time, f func(s space.Space) space.Space) {
		t.Helper()
		if _, err := store.UpdateSpace(t.Context(), "acme", spaceID, space.Update[space.Space]{At: at,
			Apply: func(s space.Space) (space.Space, error) { return f(s), nil }}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	version := func(git string) func(space.Space) space.Space {
		return func(s space.Space) space.Space {
			s.Probe.ServerVersion = &space.ServerVersion{GitVersion: git, Platform: "linux/amd64"}
			return s
		}
	}
	update(now, version("v1.31.4-eks-1")) // the first version known: no event
	update(now, version("v1.32.0-eks-1"))
	// EKS 1.32's standard support ended 2026-03-23: the announcement is
	// stored as of 13 days before (the event's time is the write's).
	update(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC), func(s space.Space) space.Space {
		s.Notices.SupportMinor, s.Notices.SupportDays = "1.32", 14
		return s
	})
	notAfter := now.Add(6 * 24 * time.Hour).Truncate(time.Second)
	update(now, func(s space.Space) space.Space {
		s.Probe.Certificate = &space.Certificate{NotAfter: notAfter, Issuer: "CN=kube-ca"}
		s.Notices.CertificateNotAfter, s.Notices.CertificateDays = &notAfter, 7
		return s
	})
	update(now, func(s space.Space) space.Space { s.Name = "renamed"; return s }) // no event

	eventually(t, "three events at the receiver", func() bool { return len(rc.requests()) >= len(types) })
	seen := map[string]int{}
	for _, h := range checkedHooks(t, rc, verifier) {
		b := h.body
		seen[b.Type]++
		if b.Data["space_id"] != spaceID {
			t.Errorf("%s names space %v; want %s", b.Type, b.Data["space_id"], spaceID)
		}
		switch b.Type {
		case "space.version_changed":
			if b.Data["from"] != "v1.31.4-eks-1" || b.Data["to"] != "v1.32.0-eks-1" {
				t.Errorf("version_changed %v", b.Data)
			}
		case "space.support_ending":
			if b.Data["threshold_days"] != 14.0 || b.Data["days_remaining"] != 13.0 || b.Data["standard_ends"] != "2026-03-23" {
				t.Errorf("support_ending %v", b.Data)
			}
		case "space.certificate_expiring":
			if b.Data["threshold_days"] != 7.0 || b.Data["issuer"] != "CN=kube-ca" {
				t.Errorf("certificate_expiring %v", b.Data)
			}
		}
	}
	for _, typ := range types {
		if seen[typ] != 1 {
			t.Errorf("%s delivered %d times; want once", typ, seen[typ])
		}
	}
	if len(rc.requests()) != len(types) {
		t.Errorf("%d requests; want %d (a change that is no event was sent)", len(rc.requests()), len(types))
	}
}

// checkedHook is a request the receiver got and its body, parsed.
type checkedHook struct {
	hookRequest
	body hookBody
}

// checkedHooks is every request rc got, each verified with the Standard
// Webhooks reference library and its body checked against its schema in
// openapi.yaml.
func checkedHooks(t *testing.T, rc *hookReceiver, verifier *standardwebhooks.Webhook) []checkedHook {
	t.Helper()
	var out []checkedHook
	for _, r := range rc.requests() {
		if err := verifier.Verify(r.body, r.header); err != nil {
			t.Errorf("the reference library refuses %s: %v", r.body, err)
		}
		var b hookBody
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		if bad := validator.Webhook(b.Type, r.body); bad != nil {
			t.Errorf("%s does not follow openapi.yaml: %v\n%s", b.Type, bad, r.body)
		}
		out = append(out, checkedHook{r, b})
	}
	return out
}
