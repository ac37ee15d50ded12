package local

import (
	"errors"
	"time"

	"spaces/infra/lambdarules"
	"spaces/shared/awsclient"
	"spaces/shared/provisioning"
	"spaces/shared/space"
	"spaces/shared/wiring"
	"spaces/shared/wiring/clouds"
	"spaces/shared/wiring/parts"
)

// ProvisioningConfig is the local stack's provisioner; zero values take the
// defaults.
type ProvisioningConfig struct {
	// Creator creates clusters (default: the clouds' creator behind
	// Config.Minter, clouds.Creator, which is provisioning.Unconfigured
	// while the minter creates none). Tests pass a double here.
	Creator space.ClusterCreator
	// PollInterval is the wait between polls of a creation (default 2 s
	// locally, so that a demo cluster lands within seconds of being ready).
	PollInterval time.Duration
	// MaxReceives is the delivery that fails a job whose step keeps failing
	// (default: the template's maxReceiveCount).
	MaxReceives int
	// Wait is the queue's long-poll time (default 20 s).
	Wait time.Duration
	// Disabled turns the poller off (jobs are still queued).
	Disabled bool
}

// DefaultLocalPollInterval is the local stack's poll interval.
const DefaultLocalPollInterval = 2 * time.Second

// startProvisioning polls the provisioning queue into the provisioner, as
// Lambda's SQS source does in AWS.
func (st *starting) startProvisioning(cfg *Config) (func(), error) {
	pc := cfg.Provisioning
	queue, ok := st.Resources["ProvisioningQueue"]
	if _, dlq := st.Resources["ProvisioningDLQ"]; !ok || !dlq {
		return nil, errors.New("the template declares no ProvisioningQueue and ProvisioningDLQ")
	}
	if pc.Disabled {
		return nil, nil
	}
	if pc.Creator == nil {
		pc.Creator = clouds.Creator(cfg.Minter)
	}
	if pc.PollInterval <= 0 {
		pc.PollInterval = DefaultLocalPollInterval
	}
	if pc.MaxReceives <= 0 {
		pc.MaxReceives = provisioning.DefaultMaxReceives
	}
	s := wiring.ProvisionerSettings{
		Common:            parts.Common{Table: st.Table, StaleAfter: cfg.StaleAfter},
		ProvisioningQueue: queue.URL, EventBus: st.Resources["EventBus"].Name,
		PollInterval: pc.PollInterval, MaxReceives: pc.MaxReceives, ProbeQueue: st.probeQueue(cfg),
	}
	var checker space.ClusterChecker
	if cfg.Minter != nil {
		checker = cfg.Minter
	}
	st.Provisioner = wiring.Provisioner(st.aws, s, pc.Creator, checker, cfg.Log)
	sqsc := awsclient.SQS(st.AWS, st.EmulatorURL)
	poller := &lambdarules.Poller{SQS: sqsc, QueueURL: queue.URL, QueueARN: queue.ARN, Function: st.function("ProvisionerFunction"), DLQURL: st.Resources["ProvisioningDLQ"].URL, Handler: st.Provisioner.HandleSQS, Wait: pc.Wait, Log: cfg.Log}
	return inBackground(poller.Run), nil
}
