package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// An agent space's secrets and lease are one item in its own partition
// (agentKey, keys.go): hashes only, never a token.
// Every agent call is one conditional UpdateItem of that item, whose
// condition is the authentication (the presented token's hash matches, it
// has not expired): a refused token changes nothing, and no read precedes
// the write. Deregister deletes the item in its transaction, so every
// token of a deregistered space is refused from that commit on.

// agentItem is the stored form. Times that conditions compare are epoch
// seconds (N); renewed_at is RFC 3339 like every other time.
type agentItem struct {
	OrgID             string `json:"org_id"`
	SpaceID           string `json:"space_id"`
	BootstrapHash     string `json:"bootstrap_hash,omitempty"`
	BootstrapExpires  int64  `json:"bootstrap_expires_at,omitempty"`
	UsedBootstrapHash string `json:"used_bootstrap_hash,omitempty"`
	CredentialHash    string `json:"credential_hash,omitempty"`
	CredentialExpires int64  `json:"credential_expires_at,omitempty"`
	PreviousHash      string `json:"previous_hash,omitempty"`
	PreviousExpires   int64  `json:"previous_expires_at,omitempty"`
	// Reuse detection (space.ErrCredentialReused): the credential that
	// last authenticated a lease or a renewal, the one the previous
	// replaced, and when a reuse revoked them all.
	LastUsedHash string `json:"last_used_hash,omitempty"`
	// ClusterBinding is the agent's cluster (space.ClusterBinding.Key),
	// which every lease must carry when set.
	ClusterBinding string               `json:"cluster_binding,omitempty"`
	SupersededHash string               `json:"superseded_hash,omitempty"`
	RevokedAt      *time.Time           `json:"credentials_revoked_at,omitempty"`
	RenewedAt      *time.Time           `json:"renewed_at,omitempty"`
	AgentVersion   string               `json:"agent_version,omitempty"`
	ServerVersion  *space.ServerVersion `json:"server_version,omitempty"`
	// The work waiting for the agent (agentwork.go; its creates and
	// handed revisions are attributes of their own, read by agentWork).
	NSWantedAt   *time.Time `json:"ns_wanted_at,omitempty"`
	NSObservedAt *time.Time `json:"ns_observed_at,omitempty"`
	// The stored list's space.NamespacesReport.Hash, and when (epoch
	// seconds) it was last written: an unchanged report and the
	// unasked-report limit are conditions on these (agentwork.go).
	NSHash   string `json:"ns_hash,omitempty"`
	NSListAt int64  `json:"ns_list_s,omitempty"`
	// The agent's MQTT connection's last lifecycle event (presence.go).
	PresenceVersion   *int64     `json:"presence_version,omitempty"`
	PresenceConnected bool       `json:"presence_connected,omitempty"`
	PresenceAt        *time.Time `json:"presence_at,omitempty"`
	PresenceReason    string     `json:"presence_reason,omitempty"`
}

// lease is the item's lease: the last renewal and the last presence.
func (it agentItem) lease() space.Lease {
	l := space.Lease{RenewedAt: it.RenewedAt, AgentVersion: it.AgentVersion, ServerVersion: it.ServerVersion}
	if it.PresenceVersion != nil && it.PresenceAt != nil {
		l.Presence = &space.Presence{Connected: it.PresenceConnected, At: *it.PresenceAt,
			Version: *it.PresenceVersion, Reason: it.PresenceReason}
	}
	return l
}

var _ space.AgentStore = (*Store)(nil)

// revokeAgentItem is the Delete Deregister adds: no condition, a direct
// space has no agent item.
func (s *Store) revokeAgentItem(id string) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{TableName: s.table, Key: agentKey(id)}}
}

// PutBootstrap records a bootstrap for a live agent space (space.AgentStore):
// one transaction checks the space is registered (and in agent mode) and
// sets the hash, so no bootstrap outlives a deregistration committed first.
func (s *Store) PutBootstrap(ctx context.Context, sp space.Space, hash string, expires time.Time) error {
	items := []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{
			TableName: s.table, Key: itemKey(sp.OrgID, prefixSpace+sp.ID),
			ConditionExpression:       aws.String("attribute_exists(#pk) AND attribute_not_exists(#del) AND #conn = :agent"),
			ExpressionAttributeNames:  map[string]string{"#pk": "pk", "#del": "deleted_at", "#conn": "connectivity"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":agent": str(string(space.ViaAgent))},
		}},
		{Update: &types.Update{
			TableName: s.table, Key: agentKey(sp.ID),
			UpdateExpression:         aws.String("SET #org = :org, #sid = :sid, #bh = :h, #bexp = :exp"),
			ExpressionAttributeNames: map[string]string{"#org": "org_id", "#sid": "space_id", "#bh": "bootstrap_hash", "#bexp": "bootstrap_expires_at"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":org": str(sp.OrgID), ":sid": str(sp.ID), ":h": str(hash), ":exp": num(expires.Unix()),
			},
		}},
	}
	return s.transact(ctx, "put bootstrap", func() ([]types.TransactWriteItem, error) { return items, nil },
		func(reasons []types.CancellationReason) error {
			if failedCheck(reasons, 0) {
				return space.ErrNotFound("space")
			}
			return nil
		})
}

// ExchangeBootstrap consumes a bootstrap once (space.AgentStore). A fresh
// install revokes the credentials an earlier agent held.
func (s *Store) ExchangeBootstrap(ctx context.Context, spaceID, bootstrapHash, credHash, binding string, credExpires, now time.Time) (string, error) {
	update := "SET #ch = :c, #cexp = :cexp, #ubh = :h REMOVE #bh, #bexp, #ph, #pexp, #lu, #sh, #rev, #bind"
	vals := map[string]types.AttributeValue{
		":c": str(credHash), ":cexp": num(credExpires.Unix()), ":h": str(bootstrapHash), ":now": num(now.Unix()),
	}
	if binding != "" {
		update = "SET #ch = :c, #cexp = :cexp, #ubh = :h, #bind = :bind REMOVE #bh, #bexp, #ph, #pexp, #lu, #sh, #rev"
		vals[":bind"] = str(binding)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: agentKey(spaceID),
		UpdateExpression:    aws.String(update),
		ConditionExpression: aws.String("#bh = :h AND #bexp > :now"),
		ExpressionAttributeNames: map[string]string{"#ch": "credential_hash", "#cexp": "credential_expires_at", "#ubh": "used_bootstrap_hash",
			"#bh": "bootstrap_hash", "#bexp": "bootstrap_expires_at", "#ph": "previous_hash", "#pexp": "previous_expires_at",
			"#lu": "last_used_hash", "#sh": "superseded_hash", "#rev": "credentials_revoked_at", "#bind": "cluster_binding"},
		ExpressionAttributeValues:           vals,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return "", s.agentRefused(ctx, spaceID, "exchange", err, func(it agentItem) error {
			switch {
			case it.UsedBootstrapHash == bootstrapHash:
				return space.ErrBootstrapReused
			case it.BootstrapHash == bootstrapHash:
				return errors.New("the bootstrap token expired")
			}
			return errors.New("no such bootstrap token")
		})
	}
	return s.agentOrg(out.Attributes)
}

// RenewCredential rotates a credential (space.AgentStore): the presented
// one must be the current or the previous and unexpired (the previous
// only while the current is unused: credentialValid); the current becomes
// the previous, valid for space.RenewOverlap more (long enough to retry a
// renewal whose answer was lost, short enough that a copied credential
// dies soon after the agent moved on), and the previous is remembered as
// superseded. A superseded credential presented revokes them all
// (refusedCredential).
func (s *Store) RenewCredential(ctx context.Context, spaceID, oldHash, newHash string, newExpires, now time.Time) (string, error) {
	// Renewing with the previous credential (its renewal's answer was lost)
	// keeps the previous as it is and replaces the current.
	for _, presented := range []string{"current", "previous"} {
		update := "SET #ph = :old, #pexp = :pexp, #ch = :new, #cexp = :nexp, #lu = :old"
		cond := "#ch = :old AND #cexp > :now"
		names := map[string]string{"#ch": "credential_hash", "#cexp": "credential_expires_at",
			"#ph": "previous_hash", "#pexp": "previous_expires_at", "#lu": "last_used_hash"}
		if presented == "previous" {
			update = "SET #ch = :new, #cexp = :nexp, #lu = :old"
			cond = "#ph = :old AND #pexp > :now AND (attribute_not_exists(#lu) OR #lu = :old)" // as credentialValid
		}
		in := &dynamodb.UpdateItemInput{
			TableName: s.table, Key: agentKey(spaceID),
			UpdateExpression:         aws.String(update),
			ConditionExpression:      aws.String(cond),
			ExpressionAttributeNames: names,
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":old": str(oldHash), ":new": str(newHash), ":nexp": num(newExpires.Unix()), ":now": num(now.Unix()),
			},
			ReturnValues:                        types.ReturnValueAllOld,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		if presented == "current" { // DynamoDB refuses values an expression does not use
			in.ExpressionAttributeValues[":pexp"] = num(now.Add(space.RenewOverlap).Unix())
		}
		out, err := s.db.UpdateItem(ctx, in)
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) && presented == "current" {
			continue // (whether or not the refusal carries the item: not every DynamoDB does)
		}
		if err != nil {
			return "", s.agentRefused(ctx, spaceID, "renew credential", err, s.refusedCredential(ctx, spaceID, oldHash, now))
		}
		var was agentItem
		if err := s.decode(out.Attributes, &was); err != nil {
			return "", err
		}
		if presented == "current" && was.PreviousHash != "" {
			// The previous it displaced is remembered, so that its use
			// is told from an unknown credential's. A second write (one
			// renewal in twelve hours), conditional on this renewal
			// standing; if lost, only that detection is.
			_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: s.table, Key: agentKey(spaceID),
				UpdateExpression:          aws.String("SET #sh = :sh"),
				ConditionExpression:       aws.String("#ch = :new"),
				ExpressionAttributeNames:  map[string]string{"#sh": "superseded_hash", "#ch": "credential_hash"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":sh": str(was.PreviousHash), ":new": str(newHash)},
			})
			var ccf *types.ConditionalCheckFailedException
			if err != nil && !errors.As(err, &ccf) {
				return "", awsError("UpdateItem superseded credential", err)
			}
		}
		return was.OrgID, nil
	}
	return "", space.ErrAgentAuth(errors.New("no such credential, or expired"))
}

// refusedCredential explains a refused credential from the item seen; a
// superseded one (agentItem.reused) revokes every credential of the
// space: one UpdateItem, conditional on the current being the one seen,
// so that a reinstall's fresh credential is never revoked by an old copy.
func (s *Store) refusedCredential(ctx context.Context, spaceID, credHash string, now time.Time) func(agentItem) error {
	return func(it agentItem) error {
		if !it.reused(credHash) {
			return errors.New("no such credential, or expired")
		}
		if it.CredentialHash == "" { // revoked already
			return space.ErrCredentialReused
		}
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: s.table, Key: agentKey(spaceID),
			UpdateExpression:    aws.String("SET #rev = :at REMOVE #ch, #cexp, #ph, #pexp"),
			ConditionExpression: aws.String("#ch = :cur"),
			ExpressionAttributeNames: map[string]string{"#rev": "credentials_revoked_at", "#ch": "credential_hash",
				"#cexp": "credential_expires_at", "#ph": "previous_hash", "#pexp": "previous_expires_at"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":at": str(now.UTC().Format(time.RFC3339Nano)), ":cur": str(it.CredentialHash)},
		})
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) {
			return fmt.Errorf("%w (revoking them failed: %v)", space.ErrCredentialReused, err)
		}
		return space.ErrCredentialReused
	}
}

// RenewLease stores a renewal if credHash is a valid credential of the
// space (space.AgentStore): one conditional write, no read. The item it
// replaced carries the work waiting for the agent (agentwork.go).
func (s *Store) RenewLease(ctx context.Context, spaceID, credHash string, r space.LeaseReport, now time.Time) (space.LeaseRenewal, error) {
	sv, err := s.encode(r.ServerVersion)
	if err != nil {
		return space.LeaseRenewal{}, err
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: agentKey(spaceID),
		UpdateExpression:    aws.String("SET #ren = :at, #av = :av, #sv = :sv, #lu = :h"),
		ConditionExpression: aws.String(credentialValid + " AND (attribute_not_exists(#bind) OR #bind = :bind)"),
		ExpressionAttributeNames: credentialNames(map[string]string{"#ren": "renewed_at", "#av": "agent_version",
			"#sv": "server_version", "#bind": "cluster_binding"}),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":at": str(now.UTC().Format(time.RFC3339Nano)), ":av": str(r.AgentVersion),
			":sv": &types.AttributeValueMemberM{Value: sv}, ":h": str(credHash), ":now": num(now.Unix()),
			":bind": str(r.Cluster.Key()),
		},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		refused := s.refusedCredential(ctx, spaceID, credHash, now)
		return space.LeaseRenewal{}, s.agentRefused(ctx, spaceID, "renew lease", err, func(it agentItem) error {
			if it.credentialValidCT(credHash, now) && it.ClusterBinding != r.Cluster.Key() {
				return fmt.Errorf("%w (bound to %s, the lease names %q)", space.ErrClusterMismatch, it.ClusterBinding, r.Cluster.Key())
			}
			return refused(it)
		})
	}
	var it agentItem
	if err := s.decode(out.Attributes, &it); err != nil {
		return space.LeaseRenewal{}, err
	}
	creates, handed, err := s.agentWork(out.Attributes)
	if err != nil {
		return space.LeaseRenewal{}, err
	}
	return space.LeaseRenewal{OrgID: it.OrgID, Before: it.RenewedAt, Presence: it.lease().Presence, Pending: space.AgentPending{
		Creates: creates, ObservedAt: it.NSObservedAt, WantedAt: it.NSWantedAt, Handed: handed}}, nil
}

// GetLease reads a space's lease (space.AgentStore), strongly consistent
// (a unit): what a check caused by a write (a lapsed lease's, a
// registration's) must see, and what a lease check's write is decided on.
func (s *Store) GetLease(ctx context.Context, spaceID string) (space.Lease, error) {
	item, err := s.getItem(ctx, agentKey(spaceID))
	return s.leaseOf(item, err)
}

// GetLeaseEventually reads a space's lease eventually consistent: half a
// unit, and possibly a moment behind the latest renewal or lifecycle
// event. The prober's minute check reads it so, and confirms with GetLease
// any result it would write (probing.Prober.lease says why).
func (s *Store) GetLeaseEventually(ctx context.Context, spaceID string) (space.Lease, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: agentKey(spaceID)})
	if err != nil {
		return space.Lease{}, awsError("GetItem", err)
	}
	return s.leaseOf(out.Item, nil)
}

func (s *Store) leaseOf(item map[string]types.AttributeValue, err error) (space.Lease, error) {
	if err != nil || item == nil {
		return space.Lease{}, err
	}
	var it agentItem
	if err := s.decode(item, &it); err != nil {
		return space.Lease{}, err
	}
	return it.lease(), nil
}

// agentRefused maps a failed agent write: a failed condition is the one
// refusal (why, from the item seen, goes to the log only).
func (s *Store) agentRefused(ctx context.Context, spaceID, op string, err error, why func(agentItem) error) error {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return awsError("UpdateItem "+op, err)
	}
	item := ccf.Item
	if item == nil {
		// Not every DynamoDB implementation returns the item: read it (a
		// refusal only, never on the path of a valid token).
		var err error
		if item, err = s.getItem(ctx, agentKey(spaceID)); err != nil {
			return err
		}
	}
	if item == nil {
		return space.ErrAgentAuth(fmt.Errorf("%s: the space has no agent item (deregistered, direct or absent)", op))
	}
	var it agentItem
	if err := s.decode(item, &it); err != nil {
		return err
	}
	return space.ErrAgentAuth(fmt.Errorf("%s: %w", op, why(it)))
}

func (s *Store) agentOrg(attrs map[string]types.AttributeValue) (string, error) {
	var it agentItem
	if err := s.decode(attrs, &it); err != nil {
		return "", err
	}
	return it.OrgID, nil
}
