package dynamostore

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"spaces/shared/space"
)

// The key design of the one table, in one place: every item, its key and
// what it holds, every index and its range key. Every key prefix, sort key
// constant and key builder is declared in this file; the other files only
// join a prefix here with an id. Attribute names are the json tags of the
// stored types (space.Space, space.Environment, ...), apart from the
// per-entry attributes a file declares beside its item (counts.go's
// counters, agentwork.go's nsc_ and rev_); stream records are decoded here
// too (Deregistration), so no other package knows a key or an attribute
// name.
//
// An org's items live in the org's partition, pk = ORG#<org_id>:
//
//	sk                 what                        attributes
//	SPACE#<id>         a space (kept after         the space's fields, times RFC 3339, version (N),
//	                   deregistration: its         deleted_at and deleted_by once deregistered,
//	                   tombstone)                  probe_shard while probed ("a"+shard for an agent space),
//	                                               pd (its space.ProbeDigest) while probed
//	CLAIM#<identity>   a cluster identity claim    space_id: the space holding the identity
//	ACCOUNT#<id>       a cloud account             its fields, space_count (N)
//	IDEMP#<key>        an Idempotency-Key record   key, hash, space (the first answer),
//	                                               expires_at (epoch seconds, the table's TTL)
//	GRANT#<space id>   the space's kubeauth grant  space_id, provider, cloud_account_id, created_at
//	ENV#<id>           an environment              its fields, space_id, gate {reason, since} while gated
//	POLICY#<id>        an autoscaler policy        its fields, space_id, state, state_reason
//	CASCADE#<space>    the space's deregistration  space_id, cascaded_at
//	                   cascade is done
//	REV#<id>           a deployment revision       its fields, manifests, state, reason, attempts,
//	                                               rev_key; stopped_key while stopped (revisions.go)
//	JOB#<id>           a provisioning job          its fields (provisioning.Job): state, operation,
//	                                               steps, failure, space_id, version (N)
//	JOBCLAIM#<identity> the live job creating      job_id; held from the job's creation until it
//	                   that cluster                succeeds or is canceled (a failed job keeps it:
//	                                               it may be retried)
//	JOBIDEMP#<key>     a job's Idempotency-Key     key, hash, job_id, expires_at (TTL)
//	COUNT#<shard>      fleet counters of the       total, status_<s>, provider_<p>, account_<id> (N),
//	                   spaces whose probe shard    each kept by the transactions that register,
//	                   is <shard> (counts.go)      deregister and transition a space
//	HOOK#<id>          a webhook endpoint          its fields (space.WebhookEndpoint), version (N),
//	                   (webhooks.go)               secrets_sealed (B: its signing secrets, KMS)
//
// A space's own partition, pk = SPACE#<space id>, holds what hangs off it:
//
//	ENV#<id>           link: the environment is bound to the space (org_id)
//	POLICY#<id>        link: the policy is on the space (org_id)
//	HIST#<at>#<to>     a status transition: org_id, space_id, from, to, reason,
//	                   message, at, published, expires_at (at + 30 days, TTL)
//	AGENT              an agent space's secrets and lease (agents.go):
//	                   org_id, space_id, bootstrap/credential hashes and
//	                   expiries, renewed_at, agent_version, server_version,
//	                   presence_* (presence.go); its waiting work
//	                   (agentwork.go): ns_wanted_at, ns_observed_at,
//	                   nsc_<namespace> and rev_<revision id>
//	AGENTNS            the agent's last reported namespace list
//	                   (agentwork.go): observed_at, observed_ns, items,
//	                   failed
//
// The prober's fleet-wide items (fence.go):
//
//	pk              sk                 what
//	FENCE#<shard>   <deleted_at>#<id>  a deregistration of the probe shard: org_id,
//	                                   space_id, expires_at (deleted_at +
//	                                   space.FenceRetention, TTL)
//	PROBE           BEAT               beat_<shard> (and beat_a): the newest tick of
//	                                   the shard the prober handled
//
// A webhook endpoint's delivery log, pk = HOOK#<endpoint id> (webhooks.go):
//
//	ATT#<at>#<webhook id> one attempt            space.DeliveryAttempt's fields,
//	                                             expires_at (at + 30 days, TTL)
//	EVT#<webhook id>      the event delivered,   space.StoredEvent's fields (data: B, the
//	                      kept for replay        JSON sent), expires_at (first attempt +
//	                                             space.EventRetention, TTL)
//	INFLIGHT              its attempts under     n (N), h_<holder> (N: when each hold
//	                      way (inflight.go)      lapses, Unix ms), expires_at (last hold +
//	                                             a day, TTL)
//
// An org's name search entries, pk = WORD#<org_id> (words.go), apart from
// the org's partition so that listing spaces never reads them:
//
//	<word>\x01<name_lc>\x01<id>  one word of a registered   provider, space_type, cloud_account_id
//	                             space's name (space.NameWords)  (what the listing filters on)
//
// An org's label entries, pk = LABEL#<org_id> (labels.go), likewise apart:
//
//	<key>=<value>\x01<id>        one label of a registered    provider, space_type, cloud_account_id
//	                             space
//
// and the same labels in problems-first order, pk = LPROB#<org_id>
// (labels.go), for a space of at most maxOrderedLabels labels; a space
// of more has the one overflow entry instead:
//
//	<key>=<value>\x01<problem_key>  one label of a registered  provider, space_type, cloud_account_id
//	                                space, at its position in
//	                                problems-first order
//	*\x01<problem_key>              a space of more labels
//
// An org's audit trail, pk = ACT#<org_id> (activity.go), apart from the
// org's partition so that listing spaces never reads it:
//
//	<at>#<event id>       one entry               space.Activity's fields, expires_at
//	                                              (at + space.ActivityRetention, TTL)
//
// The items a request writes whole or in the attributes the activity reads
// (a space, an account, a revision, a job) carry changed_by and request_id:
// the caller's subject and the request's id, when an API request wrote
// them (stamp.go); the stream carries them to the trail.
//
// Why links and not a GSI: "everything bound to a space" is one strongly
// consistent Query of its partition, which an eventually consistent index
// could not answer for a binding committed just before the deregistration.
// Each binding write is one transaction: a ConditionCheck that the space is
// registered, the item (conditional on its version) and its link(s); a link
// stays after the cascade (the environment still names the old space, gated)
// until a re-bind deletes it. History has its own partition so that reading
// one space's history never touches its org's; the transition time has a
// fixed width (nanoseconds, nine digits) so the sort key orders by time.
//
// Grants: Register puts one in its transaction and Deregister deletes it in
// its own, so a grant exists exactly while the space is registered and no
// credential can be minted for a space that is gone.
//
// The sparse GSI "probe-digest" (probe_shard HASH, sk RANGE, INCLUDE pd:
// the space's probe digest, what the prober needs, probeindex.go) holds
// only registered, non-synthetic spaces: probe_shard is "00".."15", a
// stable hash of the space id, set at registration and removed at
// deregistration; pd is rewritten with every write of the space.
// The GSIs "names", "registered", "status", "since" and "problems"
// (names.go; name_lc, name_key, reg_key, status_key, since_key and
// problem_key while registered), "env-revisions" and "stopped-revisions"
// (revisions.go) list spaces by name, registration, status, status since
// and problems first, and revisions by environment and by org.
const (
	prefixOrg      = "ORG#"
	prefixSpace    = "SPACE#"
	prefixClaim    = "CLAIM#"
	prefixAccount  = "ACCOUNT#"
	prefixIdem     = "IDEMP#"
	prefixGrant    = "GRANT#"
	prefixEnv      = "ENV#"
	prefixPolicy   = "POLICY#"
	prefixCascade  = "CASCADE#"
	prefixRevision = "REV#"
	prefixHist     = "HIST#"
	prefixJob      = "JOB#"
	prefixJobClaim = "JOBCLAIM#"
	prefixJobIdem  = "JOBIDEMP#"
	prefixCount    = "COUNT#"
	prefixFence    = "FENCE#"

	// pkBeat and skBeat key the probe beats (fence.go).
	pkBeat = "PROBE"
	skBeat = "BEAT"

	prefixWebhook = "HOOK#"
	prefixAttempt = "ATT#"
	prefixEvent   = "EVT#"

	prefixActivity = "ACT#"
	// prefixActivityID keys the marker of a recorded activity entry, by its
	// id (activity.go).
	prefixActivityID = "ACTID#"
	prefixWords      = "WORD#"
	prefixLabels     = "LABEL#"
	// prefixLabelOrder is the partition of the label entries in
	// problems-first order (labels.go).
	prefixLabelOrder = "LPROB#"
	// attrLabelOrder marks a space whose label entries in problems-first
	// order are written (labels.go), which Backfill looks for.
	attrLabelOrder = "label_order"
	// attrLabelEntries marks a space whose labels' entries are written
	// (labels.go), which Backfill looks for.
	attrLabelEntries = "label_entries"
	// attrWordEntries marks a space whose name's search entries are
	// written (words.go), which Backfill looks for.
	attrWordEntries = "word_entries"
	// attrChangedBy and attrRequestID stamp a write made by an API request
	// (stamp.go).
	attrChangedBy = "changed_by"
	attrRequestID = "request_id"

	// attrSecretsSealed holds a webhook endpoint's secrets, encrypted.
	attrSecretsSealed = "secrets_sealed"

	skAgent   = "AGENT"
	skAgentNS = "AGENTNS"

	histTime = "2006-01-02T15:04:05.000000000Z"

	probeIndex  = "probe-digest"
	probeShards = 16

	namesIndex            = "names"
	registeredIndex       = "registered"
	statusIndex           = "status"
	sinceIndex            = "since"
	problemsIndex         = "problems"
	envRevisionsIndex     = "env-revisions"
	stoppedRevisionsIndex = "stopped-revisions"

	// nameSep ends the name in name_key: lower than any character a name
	// may hold (names have no control characters), so "abc" sorts before
	// "abc d" and "abc-d".
	nameSep = "\x01"
)

func orgPK(org string) string { return prefixOrg + org }

// spacePK is the partition of a space's links and history.
func spacePK(id string) string { return prefixSpace + id }

// itemKey is the key of an item in org's partition.
func itemKey(org, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(orgPK(org)), "sk": str(sk)}
}

// linkKey is the key of an item in a space's partition.
func linkKey(spaceID, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(spacePK(spaceID)), "sk": str(sk)}
}

// agentKey is the key of an agent space's AGENT item (agents.go).
func agentKey(spaceID string) map[string]types.AttributeValue { return linkKey(spaceID, skAgent) }

// agentNSKey is the key of an agent space's last reported namespace list
// (agentwork.go).
func agentNSKey(spaceID string) map[string]types.AttributeValue { return linkKey(spaceID, skAgentNS) }

// wordsPK is the partition of org's name search entries.
func wordsPK(org string) string { return prefixWords + org }

// wordSK is the sort key of sp's search entry for word: by word, then in
// name order (the listing's order within a word).
func wordSK(word string, sp space.Space) string { return word + nameSep + nameKey(sp) }

// labelsPK is the partition of org's label entries.
func labelsPK(org string) string { return prefixLabels + org }

// labelSK is the sort key of a space's entry for its label key=value: by
// label (no key or value holds '='), then in id order, the listing's.
func labelSK(key, value, id string) string { return labelPrefix(key, value) + id }

// labelPrefix is what the entries of key=value begin with.
func labelPrefix(key, value string) string { return key + "=" + value + nameSep }

// labelOrderPK is the partition of org's label entries in problems-first
// order.
func labelOrderPK(org string) string { return prefixLabelOrder + org }

// overflowPrefix is what the problems-first entry of a space of more than
// maxOrderedLabels labels begins with: no label key begins with '*'.
const overflowPrefix = "*" + nameSep

// webhookSK is the sort key of a webhook endpoint in its org's partition.
func webhookSK(id string) string { return prefixWebhook + id }

// countSK is the sort key of the org's counter item that counts the space
// (counts.go): one per probe shard.
func countSK(spaceID string) string { return prefixCount + probeShard(spaceID) }

// nameKey is the position of s in name order.
func nameKey(s space.Space) string { return space.FoldName(s.Name) + nameSep + s.ID }

// regKey is the position of s in registration order: its creation time,
// fixed width, and its id. The sparse GSI "registered" (org_id HASH,
// reg_key RANGE, the same INCLUDE as names) holds the registered spaces in
// that order; created_at never changes, so only a registration and a
// deregistration write it.
func regKey(s space.Space) string { return s.CreatedAt.UTC().Format(histTime) + nameSep + s.ID }

// statusKey is the position of s in status order: its stored status, then
// its name order. The sparse GSI "status" (org_id HASH, status_key RANGE,
// the same INCLUDE as names) holds the registered spaces in that order; a
// transition or a rename moves the entry (writeSpace), a heartbeat does
// not. The order is the stored status: a space whose probe is stale is
// listed under it while reported unknown (space.Space.Observed).
func statusKey(s space.Space) string { return string(s.Status) + nameSep + nameKey(s) }

// sinceKey is the position of s in status-since order: when it took its
// stored status (space.Space.StatusSince), fixed width, and its id. The
// sparse GSI "since" (org_id HASH, since_key RANGE, the same INCLUDE as
// names) holds the registered spaces in that order; only a transition
// moves the entry (a rename rewrites its projected name_lc in place), a
// heartbeat, a version or a labels change does not.
func sinceKey(s space.Space) string { return s.StatusSince().Format(histTime) + nameSep + s.ID }

// problemRank places each stored status in problems-first order; a status
// not listed (none today) goes last.
var problemRank = map[space.Status]string{space.Inactive: "0", space.Unknown: "1", space.Active: "2"}

// problemKey is the position of s in problems-first order (sort=problems):
// its stored status's rank, then the time it took it counted back from
// the largest time a key can hold (fixed width, so the latest change
// sorts first in an ascending read), and its id. The sparse GSI
// "problems" (org_id HASH, problem_key RANGE, the same INCLUDE as names)
// holds the registered spaces in that order, so a page is one Query of
// it whatever the statuses it spans; like since_key, only a transition
// moves the entry.
func problemKey(s space.Space) string {
	rank, ok := problemRank[s.Status]
	if !ok {
		rank = "9"
	}
	return rank + nameSep + fmt.Sprintf("%019d", math.MaxInt64-s.StatusSince().UnixNano()) + nameSep + s.ID
}

// revKey is a revision's position among its environment's.
func revKey(r space.Revision) string { return r.CreatedAt.UTC().Format(histTime) + "#" + r.ID }

// stoppedKey is a stopped revision's position among its org's.
func stoppedKey(r space.Revision) string { return r.UpdatedAt.UTC().Format(histTime) + "#" + r.ID }

// HistoryKey is the key of a transition within its space's history; it is
// also what a history page continues after.
func HistoryKey(tr space.Transition) string {
	return tr.At.UTC().Format(histTime) + "#" + string(tr.To)
}

// probeShard is the probe index shard of a space id: a stable hash, so that
// the scheduler's shards stay balanced and a space never moves.
func probeShard(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("%02d", h.Sum32()%probeShards)
}

// agentShardPrefix marks an agent space's probe shard ("a07" beside
// "07"): the scheduler reads it with its shard and packs its spaces up to
// probing.MaxSpaces a message, since checking a lease calls no cluster
// and needs no spreading over the minute (AgentProbeTargets).
const agentShardPrefix = "a"

// probeShardOf is sp's probe shard.
func probeShardOf(sp space.Space) string {
	if sp.Connectivity == space.ViaAgent {
		return agentShardPrefix + probeShard(sp.ID)
	}
	return probeShard(sp.ID)
}

// Deregistration reads a record of the table's stream: ok when it is a
// space item's MODIFY whose new image has deleted_at and whose old image has
// not (the template's FilterCriteria passes only those).
func (s *Store) Deregistration(r events.DynamoDBEventRecord) (space.Deregistered, bool) {
	if r.EventName != string(events.DynamoDBOperationTypeModify) {
		return space.Deregistered{}, false
	}
	str := func(img map[string]events.DynamoDBAttributeValue, k string) (string, bool) {
		v, ok := img[k]
		if !ok || v.DataType() != events.DataTypeString {
			return "", false
		}
		return v.String(), true
	}
	if sk, _ := str(r.Change.Keys, "sk"); !strings.HasPrefix(sk, prefixSpace) {
		return space.Deregistered{}, false
	}
	if _, had := str(r.Change.OldImage, "deleted_at"); had {
		return space.Deregistered{}, false
	}
	at, has := str(r.Change.NewImage, "deleted_at")
	if !has {
		return space.Deregistered{}, false
	}
	var d space.Deregistered
	d.OrgID, _ = str(r.Change.NewImage, "org_id")
	d.SpaceID, _ = str(r.Change.NewImage, "id")
	d.Name, _ = str(r.Change.NewImage, "name")
	provider, _ := str(r.Change.NewImage, "provider")
	d.Provider = space.Provider(provider)
	d.CloudAccountID, _ = str(r.Change.NewImage, "cloud_account_id")
	d.DeletedBy, _ = str(r.Change.NewImage, "deleted_by")
	conn, _ := str(r.Change.NewImage, "connectivity")
	d.Connectivity = space.Connectivity(conn)
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil || d.OrgID == "" || d.SpaceID == "" {
		return space.Deregistered{}, false
	}
	d.DeletedAt = t
	return d, true
}
