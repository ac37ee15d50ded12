package space

import "context"

// Counts is an org's fleet at a glance: its registered spaces by status, by
// provider, by cloud account and by Kubernetes minor version. The store keeps them in the same writes
// that register, deregister and change the status of a space, so they are
// exact at any size and read in one request, never by walking the list.
//
// The status is the stored one, as the probe last wrote it: a space whose
// probe is stale (listed as unknown, see ProbeStale) is counted under the
// status it was last seen in.
type Counts struct {
	Total      int64              `json:"total"`
	ByStatus   map[Status]int64   `json:"by_status"`
	ByProvider map[Provider]int64 `json:"by_provider"`
	// ByAccount holds only the accounts with registered spaces.
	ByAccount map[string]int64 `json:"by_account"`
	// Synthetic counts the synthetic spaces among them (placeholders with
	// no cluster, never probed), so a screen can show them apart from the
	// clusters: the clusters are the counts above less these.
	Synthetic SyntheticCounts `json:"synthetic"`
	// ByVersion counts the spaces by the major.minor of their current
	// Kubernetes version (Space.MinorVersion), listing only versions in
	// use; VersionUnknown is the rest of Total: the spaces whose version
	// is not known (none answered or named, synthetic ones, or a space
	// registered before the counts had versions and not yet backfilled).
	ByVersion      map[string]int64 `json:"by_version"`
	VersionUnknown int64            `json:"version_unknown"`
}

// SyntheticCounts are the synthetic spaces of Counts, by stored status.
type SyntheticCounts struct {
	Total    int64            `json:"total"`
	ByStatus map[Status]int64 `json:"by_status"`
}

// NewCounts returns empty counts with every status and provider present.
func NewCounts() Counts {
	c := Counts{ByStatus: map[Status]int64{}, ByProvider: map[Provider]int64{}, ByAccount: map[string]int64{},
		Synthetic: SyntheticCounts{ByStatus: map[Status]int64{}}, ByVersion: map[string]int64{}}
	for _, s := range Statuses {
		c.ByStatus[s] = 0
		c.Synthetic.ByStatus[s] = 0
	}
	for _, p := range Providers {
		c.ByProvider[p] = 0
	}
	return c
}

// VersionMove is how a change from before to after moves a space among the
// version counts: from the minor it is counted under (counted, "" for
// none) to after's current minor. moved is false when the counts stay, so
// that a write which changes no minor (a heartbeat, a patch upgrade, a
// label) touches no counter.
func VersionMove(counted string, after Space) (to string, moved bool) {
	to = after.MinorVersion()
	return to, to != counted
}

// Counts returns org's fleet counts.
func (svc *Service) Counts(ctx context.Context, org string) (Counts, error) {
	return svc.Store.Counts(ctx, org)
}
