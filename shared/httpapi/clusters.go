package httpapi

import (
	"net/http"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// listClusters: GET /cloud-accounts/{id}/clusters — the clusters the
// account can see, each with the config to register it and the org's space
// already holding it, if any. AWS lists per region (region= is required);
// GCP and Azure list everywhere.
func (a *API) listClusters(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	d, err := a.discovery()
	if err != nil {
		return err
	}
	q := newQuery(r.URL.RawQuery, "region")
	region := q.get("region")
	acct, err := a.Spaces.GetAccount(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	switch {
	case acct.Provider == space.AWS && region == "":
		q.fail("region", "is required for an aws cloud account")
	case acct.Provider == space.AWS && space.ValidateConfigValue(space.AWS, "region", region) != "":
		q.fail("region", space.ValidateConfigValue(space.AWS, "region", region))
	case acct.Provider != space.AWS && region != "":
		q.fail("region", "is only accepted for aws cloud accounts")
	}
	if err := q.err(); err != nil {
		return err
	}
	if !acct.Ready() {
		return acct.NotReady("")
	}
	list, err := d.Clusters.ListClusters(r.Context(), acct, region)
	if err != nil {
		return err
	}
	ids := make([]string, len(list))
	for i, c := range list {
		ids[i] = space.Identity(acct.Provider, c.Config)
	}
	holders, err := d.Claims.ClaimHolders(r.Context(), p.OrgID, ids)
	if err != nil {
		return err
	}
	for i := range list {
		list[i].RegisteredSpaceID = holders[ids[i]]
	}
	if list == nil {
		list = []space.DiscoveredCluster{}
	}
	writeJSON(w, http.StatusOK, "application/json", listResponse[space.DiscoveredCluster]{Items: list})
	return nil
}
