package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// Provisioning jobs (keys.go: JOB#, JOBCLAIM#, JOBIDEMP#).

var _ provisioning.Store = (*Store)(nil)

type jobClaimRecord struct {
	JobID string `json:"job_id"`
}

type jobIdemRecord struct {
	provisioning.Idempotency
	ExpiresAt int64 `json:"expires_at"`
}

func (s *Store) jobItem(j provisioning.Job) (map[string]types.AttributeValue, error) {
	item, err := s.encode(j)
	if err != nil {
		return nil, err
	}
	for k, v := range itemKey(j.OrgID, prefixJob+j.ID) {
		item[k] = v
	}
	return item, nil
}

// CreateJob stores a queued job in one transaction: the job (only if
// absent), its identity claim among live jobs (only if absent), a check
// that no space holds the identity, and the Idempotency-Key's record (only
// if absent or expired).
func (s *Store) CreateJob(ctx context.Context, j provisioning.Job, idem provisioning.Idempotency) error {
	if len(idem.Key) > maxKeyLen {
		return &space.Error{Kind: space.KindInvalid, Message: "the Idempotency-Key is not valid",
			Fields: []space.FieldError{{Field: "Idempotency-Key", Reason: fmt.Sprintf("must be at most %d characters", maxKeyLen)}}}
	}
	item, err := s.jobItem(j)
	if err != nil {
		return err
	}
	stampItem(ctx, item)
	claim := itemKey(j.OrgID, prefixJobClaim+j.Identity())
	claim["job_id"] = str(j.ID)
	const (
		iJob = iota
		iJobClaim
		iSpaceClaim
		iIdem
	)
	absent := "attribute_not_exists(" + nPK + ")"
	items := []types.TransactWriteItem{
		iJob: {Put: &types.Put{TableName: s.table, Item: item,
			ConditionExpression: aws.String(absent), ExpressionAttributeNames: names(nPK)}},
		iJobClaim: {Put: &types.Put{TableName: s.table, Item: claim,
			ConditionExpression: aws.String(absent), ExpressionAttributeNames: names(nPK),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		iSpaceClaim: {ConditionCheck: &types.ConditionCheck{TableName: s.table,
			Key:                 itemKey(j.OrgID, prefixClaim+j.Identity()),
			ConditionExpression: aws.String(absent), ExpressionAttributeNames: names(nPK),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
	}
	if idem.Key != "" {
		rec, err := s.encode(jobIdemRecord{Idempotency: idem, ExpiresAt: s.now().Add(IdempotencyTTL).Unix()})
		if err != nil {
			return err
		}
		for k, v := range itemKey(j.OrgID, prefixJobIdem+idem.Key) {
			rec[k] = v
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: s.table, Item: rec,
			ConditionExpression:                 aws.String(absent + " OR " + nExpires + " < :now"),
			ExpressionAttributeNames:            names(nPK, nExpires),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(s.now().Unix())},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}})
	}
	return s.transact(ctx, "create job", func() ([]types.TransactWriteItem, error) { return items, nil },
		func(reasons []types.CancellationReason) error {
			switch {
			case idem.Key != "" && failedCheck(reasons, iIdem):
				rec, found, err := s.jobIdem(ctx, j.OrgID, idem.Key, reasons[iIdem].Item)
				if err != nil {
					return err
				}
				if found {
					return &provisioning.ReplayError{Record: rec}
				}
				return errRetry
			case failedCheck(reasons, iSpaceClaim):
				holder, err := s.claimHolder(ctx, j.OrgID, j.Identity(), reasons[iSpaceClaim].Item)
				if err != nil {
					return err
				}
				if holder == "" {
					return errRetry // deregistered meanwhile
				}
				return &space.Error{Kind: space.KindConflict, ExistingID: holder,
					Message: "this cluster is already registered in the org as space " + holder}
			case failedCheck(reasons, iJobClaim):
				job, err := s.jobClaimHolder(ctx, j.OrgID, j.Identity(), reasons[iJobClaim].Item)
				if err != nil {
					return err
				}
				if job == "" {
					return errRetry // released meanwhile
				}
				return jobClaimConflict(job)
			case failedCheck(reasons, iJob):
				return internal("create job", fmt.Errorf("job id %s is already taken", j.ID))
			}
			return nil
		})
}

// jobClaimHolder returns the id of the job claiming identity ("" if
// none), from a cancellation reason's item when DynamoDB returned it, else
// read consistently.
func (s *Store) jobClaimHolder(ctx context.Context, org, identity string, item map[string]types.AttributeValue) (string, error) {
	if item == nil {
		var err error
		if item, err = s.getItem(ctx, itemKey(org, prefixJobClaim+identity)); err != nil {
			return "", err
		}
	}
	if item == nil {
		return "", nil
	}
	var c jobClaimRecord
	if err := s.decode(item, &c); err != nil {
		return "", err
	}
	return c.JobID, nil
}

// jobClaimConflict is the answer to any path that takes a cluster a job
// claims: registration (synthetic too) and another job.
func jobClaimConflict(job string) error {
	return &space.Error{Kind: space.KindConflict, ExistingJobID: job,
		Message: "this cluster is already being provisioned in the org by job " + job + " (cancel it first if it failed)"}
}

// jobIdem returns the unexpired record of key, from a cancellation
// reason's item when DynamoDB returned it, else read consistently.
func (s *Store) jobIdem(ctx context.Context, org, key string, item map[string]types.AttributeValue) (provisioning.Idempotency, bool, error) {
	if item == nil {
		var err error
		if item, err = s.getItem(ctx, itemKey(org, prefixJobIdem+key)); err != nil {
			return provisioning.Idempotency{}, false, err
		}
	}
	if item == nil {
		return provisioning.Idempotency{}, false, nil
	}
	var rec jobIdemRecord
	if err := s.decode(item, &rec); err != nil {
		return provisioning.Idempotency{}, false, err
	}
	return rec.Idempotency, rec.ExpiresAt >= s.now().Unix(), nil
}

// JobIdempotency reads the unexpired record of an Idempotency-Key.
func (s *Store) JobIdempotency(ctx context.Context, org, key string) (provisioning.Idempotency, bool, error) {
	if len(key) > maxKeyLen {
		return provisioning.Idempotency{}, false, nil
	}
	return s.jobIdem(ctx, org, key, nil)
}

// GetJob returns one of org's jobs.
func (s *Store) GetJob(ctx context.Context, org, id string) (provisioning.Job, error) {
	var j provisioning.Job
	return j, s.getDecoded(ctx, org, prefixJob+id, provisioning.JobNoun, &j)
}

// ListJobs returns org's jobs in id order.
func (s *Store) ListJobs(ctx context.Context, org string, page space.Page) ([]provisioning.Job, string, error) {
	return listOrg(ctx, s, org, prefixJob, page, func(j provisioning.Job) string { return j.ID })
}

// UpdateJob changes a job (see space.Update): replaced only if its stored
// version is the one read; a job that succeeds or is canceled releases its
// identity claim in the same transaction, so that the claim is held
// exactly while a job may still create the cluster.
func (s *Store) UpdateJob(ctx context.Context, org, id string, u space.Update[provisioning.Job]) (space.Updated[provisioning.Job], error) {
	return space.Run(ctx, provisioning.JobVersioned, u,
		func(ctx context.Context) (provisioning.Job, error) { return s.GetJob(ctx, org, id) },
		func(ctx context.Context, before, after provisioning.Job) error {
			item, err := s.jobItem(after)
			if err != nil {
				return err
			}
			stampItem(ctx, item)
			put := s.versionedPut(item, before.Version)
			releases := (after.State == provisioning.Succeeded || after.State == provisioning.Canceled) &&
				before.State != provisioning.Succeeded && before.State != provisioning.Canceled
			if !releases {
				return s.putVersioned(ctx, provisioning.JobNoun, put, before.Version)
			}
			const (
				iJob = iota
				iClaim
			)
			items := []types.TransactWriteItem{
				iJob: {Put: put},
				// Only this job's claim: absent already is fine too.
				iClaim: {Delete: &types.Delete{TableName: s.table, Key: itemKey(org, prefixJobClaim+after.Identity()),
					ConditionExpression:       aws.String("attribute_not_exists(" + nPK + ") OR job_id = :job"),
					ExpressionAttributeNames:  names(nPK),
					ExpressionAttributeValues: map[string]types.AttributeValue{":job": str(after.ID)}}},
			}
			return s.transact(ctx, "update job", func() ([]types.TransactWriteItem, error) { return items, nil },
				func(reasons []types.CancellationReason) error {
					switch {
					case failedCheck(reasons, iJob):
						return s.changedFrom(provisioning.JobNoun, reasons[iJob].Item, before.Version)
					case failedCheck(reasons, iClaim):
						return internal("update job", fmt.Errorf("the identity claim of job %s is held by another job", after.ID))
					}
					return nil
				})
		})
}
