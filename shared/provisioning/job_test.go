package provisioning

import (
	"errors"
	"strings"
	"testing"
	"time"

	"spaces/shared/space"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func newJob() Job {
	return Job{ID: "9b2f6c1e-4d3a-4f5b-8c7d-6e5f4a3b2c1d", OrgID: "acme", Provider: space.AWS,
		CloudAccountID: "6f1c2b4e-8a3d-4c5e-9f70-1a2b3c4d5e6f", Config: space.Config{"clusterName": "c1", "region": "us-east-1"},
		State: Queued, Since: t0, Steps: []Step{{State: Queued, At: t0}}, CreatedAt: t0, UpdatedAt: t0, Version: 1}
}

func under(stage, status string) Outcome {
	return Outcome{Progress: space.CreateProgress{Operation: space.CloudOperation{Stage: stage, ID: "c1"}, Status: status}}
}

func ready() Outcome {
	return Outcome{Progress: space.CreateProgress{Operation: space.CloudOperation{Stage: "nodegroup", ID: "c1-nodes"}, Status: "ACTIVE", Done: true}}
}

var (
	unavailable = Outcome{Err: &space.Error{Kind: space.KindUnavailable, Reason: space.ReasonCloudUnavailable, Message: "503 from EKS"}}
	refusedOut  = Outcome{Err: &space.Error{Kind: space.KindInvalid, Reason: space.ReasonCloudRefused, Message: "QuotaExceeded: 0 vCPU left"}}
)

// TestStepTable walks the step table: each row is one delivery's call
// outcome and what the job becomes.
func TestStepTable(t *testing.T) {
	p := Policy{PollInterval: 30 * time.Second, MaxErrors: 3, MaxWait: 10 * time.Minute}
	type row struct {
		name      string
		at        time.Duration
		action    Action
		o         Outcome
		state     State
		delay     time.Duration
		cloud     string
		errors    int
		failure   string // reason, "" for none
		retryable bool
	}
	table := []struct {
		name string
		rows []row
	}{
		{"happy path", []row{
			{"begin", 0, ActBegin, Outcome{}, Creating, 0, "", 0, "", false},
			{"create accepted", time.Second, ActStartCreate, under("cluster", "CREATING"), WaitingReady, 30 * time.Second, "CREATING", 0, "", false},
			{"still creating", 31 * time.Second, ActAdvance, under("cluster", "CREATING"), WaitingReady, 30 * time.Second, "CREATING", 0, "", false},
			{"nodes next", 61 * time.Second, ActAdvance, under("nodegroup", "CREATING"), WaitingReady, 30 * time.Second, "CREATING", 0, "", false},
			{"ready", 91 * time.Second, ActAdvance, ready(), Registering, 0, "ACTIVE", 0, "", false},
			{"registered", 92 * time.Second, ActRegister, Outcome{SpaceID: "s1"}, Succeeded, 0, "ACTIVE", 0, "", false},
		}},
		{"ready at once", []row{
			{"begin", 0, ActBegin, Outcome{}, Creating, 0, "", 0, "", false},
			{"create finds it ready", time.Second, ActStartCreate, ready(), Registering, 0, "ACTIVE", 0, "", false},
		}},
		{"transient errors back off, then recover", []row{
			{"begin", 0, ActBegin, Outcome{}, Creating, 0, "", 0, "", false},
			{"503", time.Second, ActStartCreate, unavailable, Creating, 30 * time.Second, "", 1, "", false},
			{"503 again", 31 * time.Second, ActStartCreate, unavailable, Creating, 60 * time.Second, "", 2, "", false},
			{"accepted", 91 * time.Second, ActStartCreate, under("cluster", "CREATING"), WaitingReady, 30 * time.Second, "CREATING", 0, "", false},
		}},
		{"transient errors fail the job at MaxErrors", []row{
			{"begin", 0, ActBegin, Outcome{}, Creating, 0, "", 0, "", false},
			{"1", time.Second, ActStartCreate, unavailable, Creating, 30 * time.Second, "", 1, "", false},
			{"2", 2 * time.Second, ActStartCreate, unavailable, Creating, 60 * time.Second, "", 2, "", false},
			{"3", 3 * time.Second, ActStartCreate, unavailable, Failed, 0, "", 0, ReasonStepKeptFailing, true},
		}},
		{"the cloud refuses", []row{
			{"begin", 0, ActBegin, Outcome{}, Creating, 0, "", 0, "", false},
			{"quota", time.Second, ActStartCreate, refusedOut, Failed, 0, "", 0, space.ReasonCloudRefused, false},
		}},
		{"the cloud fails the creation while polled", []row{
			{"begin", 0, ActBegin, Outcome{}, Creating, 0, "", 0, "", false},
			{"accepted", time.Second, ActStartCreate, under("cluster", "CREATING"), WaitingReady, 30 * time.Second, "CREATING", 0, "", false},
			{"failed", 31 * time.Second, ActAdvance, refusedOut, Failed, 0, "CREATING", 0, space.ReasonCloudRefused, false},
		}},
		{"too slow", []row{
			{"begin", 0, ActBegin, Outcome{}, Creating, 0, "", 0, "", false},
			{"accepted", time.Second, ActStartCreate, under("cluster", "CREATING"), WaitingReady, 30 * time.Second, "CREATING", 0, "", false},
			{"past MaxWait", 12 * time.Minute, ActAdvance, under("cluster", "CREATING"), Failed, 0, "CREATING", 0, ReasonTimedOut, true},
		}},
		{"registration conflict", []row{
			{"begin", 0, ActBegin, Outcome{}, Creating, 0, "", 0, "", false},
			{"ready", time.Second, ActStartCreate, ready(), Registering, 0, "ACTIVE", 0, "", false},
			{"registered by hand meanwhile", 2 * time.Second, ActRegister,
				Outcome{Err: &space.Error{Kind: space.KindConflict, ExistingID: "s0", Message: "already registered as space s0"}},
				Failed, 0, "ACTIVE", 0, ReasonRegistration, false},
		}},
		{"account not ready at registration", []row{
			{"begin", 0, ActBegin, Outcome{}, Creating, 0, "", 0, "", false},
			{"ready", time.Second, ActStartCreate, ready(), Registering, 0, "ACTIVE", 0, "", false},
			{"account failed", 2 * time.Second, ActRegister,
				Outcome{Err: space.CloudAccount{ID: "a", Status: space.AccountFailed}.NotReady("cloud_account_id")},
				Failed, 0, "ACTIVE", 0, space.ReasonAccountNotReady, true},
		}},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob()
			for _, r := range tc.rows {
				if a := ActionFor(j.State); a != r.action {
					t.Fatalf("%s: action for %s = %d, want %d", r.name, j.State, a, r.action)
				}
				before := j
				var delay time.Duration
				j, delay = Next(j, r.o, t0.Add(r.at), p)
				if j.State != r.state || j.CloudStatus != r.cloud || j.Errors != r.errors || (!j.State.Terminal() && delay != r.delay) {
					t.Fatalf("%s: %s cloud %q errors %d delay %s; want %s %q %d %s", r.name, j.State, j.CloudStatus, j.Errors, delay, r.state, r.cloud, r.errors, r.delay)
				}
				switch {
				case r.failure == "" && j.Failure != nil:
					t.Fatalf("%s: unexpected failure %+v", r.name, j.Failure)
				case r.failure != "" && (j.Failure == nil || j.Failure.Reason != r.failure || j.Failure.Retryable != r.retryable || j.Failure.Step != before.State):
					t.Fatalf("%s: failure %+v; want %s at %s, retryable %v", r.name, j.Failure, r.failure, before.State, r.retryable)
				}
				if len(before.Steps) > 0 && len(j.Steps) > 0 && &before.Steps[0] == &j.Steps[0] {
					t.Fatalf("%s: Next shares the steps of the job it was given", r.name)
				}
				if j.State != before.State && (j.Steps[len(j.Steps)-1].State != j.State || !j.Since.Equal(t0.Add(r.at))) {
					t.Fatalf("%s: entering %s recorded no step or since: %+v since %v", r.name, j.State, j.Steps, j.Since)
				}
			}
		})
	}
}

func TestFailureKeepsTheCloudsWords(t *testing.T) {
	j, _ := Next(newJob(), Outcome{}, t0, Policy{})
	j, _ = Next(j, refusedOut, t0, Policy{})
	if !strings.Contains(j.Failure.Message, "QuotaExceeded: 0 vCPU left") {
		t.Errorf("failure message %q", j.Failure.Message)
	}
	j, _ = Next(newJob(), Outcome{}, t0, Policy{})
	j, _ = Next(j, Outcome{Err: errors.New("unclassified")}, t0, Policy{MaxErrors: 1})
	if j.State != Failed || !strings.Contains(j.Failure.Message, "unclassified") {
		t.Errorf("an unclassified error is transient and, at the limit, fails with its text: %+v", j.Failure)
	}
}

func TestStepsAreBounded(t *testing.T) {
	j, _ := Next(newJob(), Outcome{}, t0, Policy{})
	j, _ = Next(j, under("cluster", "s0"), t0, Policy{MaxWait: time.Hour})
	for i := range 3 * MaxSteps {
		j, _ = Next(j, under("cluster", "s"+strings.Repeat("x", i%7)+string(rune('a'+i%26))), t0.Add(time.Duration(i)*time.Second), Policy{MaxWait: time.Hour})
	}
	if len(j.Steps) != MaxSteps || j.Steps[0].State != Queued {
		t.Errorf("%d steps, first %s; want %d starting with queued", len(j.Steps), j.Steps[0].State, MaxSteps)
	}
	if j.Polls != 3*MaxSteps {
		t.Errorf("polls %d", j.Polls)
	}
}

func TestCancelAndRetry(t *testing.T) {
	j := newJob()
	c, err := Cancel(j, t0)
	if err != nil || c.State != Canceled || c.LeftInCloud != "nothing: the cloud was never called" {
		t.Errorf("cancel of a queued job: %+v %v", c, err)
	}
	if _, err := Cancel(c, t0); space.KindOf(err) != space.KindConflict {
		t.Errorf("cancel of a canceled job: %v", err)
	}
	j, _ = Next(j, Outcome{}, t0, Policy{})
	c, _ = Cancel(j, t0)
	if !strings.Contains(c.LeftInCloud, "may have reached the cloud") {
		t.Errorf("cancel while creating: %q", c.LeftInCloud)
	}
	j, _ = Next(j, under("cluster", "CREATING"), t0, Policy{})
	c, _ = Cancel(j, t0)
	if !strings.Contains(c.LeftInCloud, "operation cluster c1") {
		t.Errorf("cancel while waiting: %q", c.LeftInCloud)
	}
	reg, _ := Next(j, ready(), t0, Policy{})
	if _, err := Cancel(reg, t0); space.KindOf(err) != space.KindConflict {
		t.Errorf("cancel while registering: %v", err)
	}
	if _, err := Retry(j, t0); space.KindOf(err) != space.KindConflict {
		t.Errorf("retry of a live job: %v", err)
	}
	failed, _ := Next(j, refusedOut, t0, Policy{})
	r, err := Retry(failed, t0.Add(time.Minute))
	if err != nil || r.State != WaitingReady || r.Failure != nil || r.Operation == nil || !r.Since.Equal(t0.Add(time.Minute)) {
		t.Errorf("retry: %+v %v; want back waiting on the same operation", r, err)
	}
	p := Poisoned(j, t0, 5)
	if p.State != Failed || p.Failure.Reason != ReasonStepKeptFailing || !p.Failure.Retryable || p.Failure.Step != WaitingReady {
		t.Errorf("poisoned: %+v", p.Failure)
	}
	c, _ = Cancel(p, t0)
	if c.State != Canceled {
		t.Errorf("a failed job can be canceled: %s", c.State)
	}
}

// TestJobWebhookEvent: a job's change is an event when it enters
// succeeded (with its space) or failed (with its failure), again after a
// retry; no other change is.
func TestJobWebhookEvent(t *testing.T) {
	at := func(s State) Job {
		j := newJob()
		j.State, j.Since, j.SpaceID = s, t0, "s1"
		j.Failure = &Failure{Step: Creating, Reason: ReasonTimedOut, Message: "late", Retryable: true}
		return j
	}
	for _, c := range []struct {
		from, to State
		want     space.EventType
	}{
		{Registering, Succeeded, space.EventJobSucceeded},
		{Creating, Failed, space.EventJobFailed},
		{Failed, Failed, ""},
		{Queued, Creating, ""},
		{Creating, Canceled, ""},
		{Failed, Creating, ""},
	} {
		got, d, ok := WebhookEvent(at(c.from), at(c.to))
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s -> %s: %q %v; want %q", c.from, c.to, got, ok, c.want)
			continue
		}
		switch got {
		case space.EventJobSucceeded:
			if d.SpaceID != "s1" || d.Failure != nil || !d.At.Equal(t0) {
				t.Errorf("succeeded data %+v", d)
			}
		case space.EventJobFailed:
			if d.SpaceID != "" || d.Failure == nil || d.Failure.Reason != ReasonTimedOut || d.Failure.Step != "creating" {
				t.Errorf("failed data %+v", d)
			}
		}
	}
}
