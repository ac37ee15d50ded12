package httpapi

import (
	"log/slog"
	"net/http"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// Deployment revisions: pushed to an environment, claimed asynchronously
// (shared/revisions); the rules are the domain's (space.Revisions).

func (a *API) revisions() (*space.Revisions, error) {
	if a.Revisions == nil || a.Revisions.Queue == nil {
		return nil, space.Errorf(space.KindUnavailable, "deployment revisions are not configured")
	}
	return a.Revisions, nil
}

func (a *API) pushRevision(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	rv, err := a.revisions()
	if err != nil {
		return err
	}
	var manifests []map[string]any
	if err := readObject(w, r, map[string]any{"manifests": &manifests}); err != nil {
		return err
	}
	rev, err := rv.Push(r.Context(), p.OrgID, r.PathValue("id"), manifests)
	if err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("revision_id", rev.ID))
	w.Header().Set("Location", "/revisions/"+rev.ID)
	writeVersioned(w, http.StatusAccepted, rev.Version, rev)
	return nil
}

func (a *API) getRevision(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	rv, err := a.revisions()
	if err != nil {
		return err
	}
	rev, err := rv.Get(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, rev.Version, rev)
	return nil
}

func (a *API) retryRevision(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	rv, err := a.revisions()
	if err != nil {
		return err
	}
	rev, err := rv.Retry(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusAccepted, rev.Version, rev)
	return nil
}
