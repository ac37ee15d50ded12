package space

import (
	"context"
	"errors"
	"maps"
)

// CreateAccount validates and stores a new cloud account, pending, with a
// generated external id for AWS, then asks the cloud at once: a customer
// who set up the trust beforehand gets a ready account straight away. A
// first check that fails leaves it pending (the customer has not applied
// the setup yet), unless the trust is too wide, which fails it.
func (svc *Service) CreateAccount(ctx context.Context, org string, in NewAccountInput) (CloudAccount, error) {
	if err := in.Validate(); err != nil {
		return CloudAccount{}, err
	}
	conn := maps.Clone(in.Connection)
	if in.Provider == AWS {
		conn["externalId"] = NewExternalID()
	}
	a := CloudAccount{
		ID:         svc.NewID(),
		OrgID:      org,
		Provider:   in.Provider,
		Name:       in.Name,
		Connection: conn,
		Status:     AccountPending,
		CreatedAt:  svc.Now().UTC(),
		Version:    1,
	}
	a.StatusReason, a.StatusMessage = ReasonNotVerified, "apply the setup, then POST /cloud-accounts/"+a.ID+"/verify"
	if err := svc.Store.CreateAccount(ctx, a); err != nil {
		return CloudAccount{}, err
	}
	if svc.Verifier != nil {
		// The account is stored whatever the cloud says: the answer
		// carries the setup the customer needs next.
		if next, err := svc.verify(ctx, a, false); err == nil || KindOf(err) == KindInvalid {
			a = next
		}
	}
	return svc.withSetup(a), nil
}

// VerifyAccount asks the customer's cloud again whether it trusts the org's
// identity for the account: ready when it does; failed, with the cloud's
// reason, and a 422 problem when it does not; unchanged and 503 when the
// cloud cannot tell. A legacy AWS account first gets a generated external
// id in place of the one its creator chose (and stays pending until the
// role's trust policy names the new one).
func (svc *Service) VerifyAccount(ctx context.Context, org, id string) (CloudAccount, error) {
	if !ValidID(id) {
		return CloudAccount{}, ErrNotFound("cloud account")
	}
	a, err := svc.Store.GetAccount(ctx, org, id)
	if err != nil {
		return CloudAccount{}, err
	}
	if svc.Verifier == nil {
		return CloudAccount{}, &Error{Kind: KindUnavailable, Reason: ReasonCloudUnavailable,
			Message: "no cloud is reachable from this deployment: the account cannot be verified"}
	}
	explicit := true
	if a.Legacy && a.Provider == AWS {
		a.Connection = maps.Clone(a.Connection)
		a.Connection["externalId"] = NewExternalID()
		explicit = false
	}
	next, err := svc.verify(ctx, a, explicit)
	if err != nil && !explicit && KindOf(err) == KindInvalid {
		err = &Error{Kind: KindInvalid, Reason: ReasonReverificationRequired,
			Message: "a new external id was generated for this connection: put the trust policy of its setup on the role, then verify again"}
	}
	return svc.withSetup(next), err
}

// verify runs the verifier and stores the result. A refusal fails the
// account when explicit (or when the trust is too wide) and is returned as
// a KindInvalid problem; a cloud that cannot tell changes nothing.
func (svc *Service) verify(ctx context.Context, a CloudAccount, explicit bool) (CloudAccount, error) {
	verr := svc.Verifier.VerifyAccount(ctx, a)
	if verr != nil && KindOf(verr) == KindUnavailable {
		return a, verr
	}
	next := a
	next.Version++
	next.Legacy = false
	next.StatusReason, next.StatusMessage = "", ""
	var problem error
	if verr == nil {
		now := svc.Now().UTC()
		next.Status, next.VerifiedAt = AccountReady, &now
	} else {
		reason, msg := ReasonAccessDenied, verr.Error()
		var de *Error
		if errors.As(verr, &de) {
			if de.Reason != "" {
				reason = de.Reason
			}
			msg = de.Message
		}
		next.Status = AccountPending
		next.StatusReason, next.StatusMessage = reason, msg
		switch {
		case explicit || reason == ReasonExternalIDNotRequired || reason == ReasonTrustNotOrgBound:
			next.Status = AccountFailed
		case !a.Legacy:
			// A first try before the customer applied the setup is
			// expected to be refused: say what to do, with the cloud's
			// answer.
			next.StatusReason = ReasonNotVerified
			next.StatusMessage = "apply the setup, then POST /cloud-accounts/" + a.ID + "/verify (the cloud answers now: " + msg + ")"
		}
		problem = &Error{Kind: KindInvalid, Reason: reason, Message: "the cloud does not trust this org's identity for the account: " + msg}
	}
	saver, ok := svc.Store.(AccountSaver)
	if !ok {
		return a, Errorf(KindInternal, "the store cannot save accounts")
	}
	if err := saver.SaveAccount(ctx, next); err != nil {
		return a, err
	}
	return next, problem
}

func (svc *Service) withSetup(a CloudAccount) CloudAccount {
	a.Setup = svc.Trust.Setup(a)
	return a
}

// GetAccount returns one of org's accounts.
func (svc *Service) GetAccount(ctx context.Context, org, id string) (CloudAccount, error) {
	if !ValidID(id) {
		return CloudAccount{}, ErrNotFound("cloud account")
	}
	a, err := svc.Store.GetAccount(ctx, org, id)
	if err != nil {
		return CloudAccount{}, err
	}
	return svc.withSetup(a), nil
}

// ListAccounts pages through org's accounts.
func (svc *Service) ListAccounts(ctx context.Context, org string, page Page) ([]CloudAccount, string, error) {
	items, next, err := svc.Store.ListAccounts(ctx, org, page)
	for i := range items {
		items[i] = svc.withSetup(items[i])
	}
	return items, next, err
}

// DeleteAccount removes an account no registered space uses.
func (svc *Service) DeleteAccount(ctx context.Context, org, id string) error {
	if !ValidID(id) {
		return ErrNotFound("cloud account")
	}
	return svc.Store.DeleteAccount(ctx, org, id)
}
