package local

import (
	"errors"
	"time"

	"spaces/infra/lambdarules"
	"spaces/infra/staticminter"
	"spaces/shared/awsclient"
	"spaces/shared/kubeapply"
	"spaces/shared/kubecred"
	"spaces/shared/tracing"
	"spaces/shared/wiring"
)

// RevisionsConfig is the local stack's revision claims; zero values take
// the defaults.
type RevisionsConfig struct {
	// Minter mints credentials for the claims (default: Config.Minter, else
	// none: every claim on an active space is retried).
	Minter kubecred.Minter
	// Backoff is the first retry's wait against a space that is not active
	// (default revisions.DefaultBackoff).
	Backoff time.Duration
	// Wait is the queue's long-poll time (default 20 s).
	Wait time.Duration
	// Disabled turns the poller off (revisions are still queued).
	Disabled bool
}

// startRevisions polls the revisions queue into the claimer, as Lambda's
// SQS source does in AWS.
func (st *starting) startRevisions(cfg *Config) (func(), error) {
	rc := cfg.Revisions
	queue, ok := st.Resources["RevisionsQueue"]
	dlq, ok2 := st.Resources["RevisionsDLQ"]
	if !ok || !ok2 {
		return nil, errors.New("the template declares no RevisionsQueue and RevisionsDLQ")
	}
	if rc.Disabled {
		return nil, nil
	}
	switch {
	case rc.Minter != nil:
	case cfg.Minter != nil:
		rc.Minter = cfg.Minter
	default:
		rc.Minter = staticminter.Unconfigured{}
	}
	claimer := wiring.Claimer(st.aws, wiring.ClaimerSettings{
		Common:         st.common(cfg),
		RevisionsQueue: queue.URL, RevisionsDLQ: dlq.URL, Backoff: rc.Backoff, Wakes: st.wakes(),
	}, rc.Minter, &kubeapply.Applier{}, cfg.Log)
	sqsc := awsclient.SQS(st.AWS, st.EmulatorURL)
	poller := &lambdarules.Poller{SQS: sqsc, QueueURL: queue.URL, QueueARN: queue.ARN, Function: st.function("RevisionsFunction"), DLQURL: st.Resources["RevisionsDLQ"].URL, Handler: tracing.Handler(cfg.Tracing, "revisions", claimer.HandleSQS), Wait: rc.Wait, Log: cfg.Log}
	return inBackground(poller.Run), nil
}
