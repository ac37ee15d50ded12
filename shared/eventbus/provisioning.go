package eventbus

import (
	"context"
	"fmt"
	"time"

	"spaces/shared/provisioning"
)

// Detail-types of a provisioning job's end.
const (
	JobSucceeded = "Provisioning Job Succeeded"
	JobFailed    = "Provisioning Job Failed"
)

// JobDetail is the detail of a provisioning job's end. Events are
// published at least once: consumers dedupe on job_id and state.
type JobDetail struct {
	OrgID          string                `json:"org_id"`
	JobID          string                `json:"job_id"`
	State          provisioning.State    `json:"state"`
	Provider       string                `json:"provider"`
	CloudAccountID string                `json:"cloud_account_id"`
	ClusterName    string                `json:"cluster_name"`
	SpaceID        string                `json:"space_id,omitempty"`
	Failure        *provisioning.Failure `json:"failure,omitempty"`
	At             time.Time             `json:"at"`
}

// PublishJob publishes the end of a succeeded or failed job.
func (p *Publisher) PublishJob(ctx context.Context, j provisioning.Job) error {
	var dt string
	switch j.State {
	case provisioning.Succeeded:
		dt = JobSucceeded
	case provisioning.Failed:
		dt = JobFailed
	case provisioning.Canceled:
		return nil // ended by its caller, who knows
	default:
		return fmt.Errorf("eventbridge: job %s is %s, not ended", j.ID, j.State)
	}
	at := j.Since.UTC()
	return p.put(ctx, dt, at, JobDetail{OrgID: j.OrgID, JobID: j.ID, State: j.State, Provider: string(j.Provider),
		CloudAccountID: j.CloudAccountID, ClusterName: j.Config["clusterName"], SpaceID: j.SpaceID, Failure: j.Failure, At: at})
}
