package httpapi

import (
	"log/slog"
	"net/http"
	"strings"

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

// listRevisions answers GET /environments/{id}/revisions: the environment's
// revisions without their manifests, newest first, paged with a cursor
// bound to the org and the environment.
func (a *API) listRevisions(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	rv, err := a.revisions()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	q := newQuery(r.URL.RawQuery, pageParams...)
	scope := strings.Join([]string{"revisions", p.OrgID, id}, "|")
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := rv.List(r.Context(), p.OrgID, id, page)
	return writeList(a, w, r, scope, items, after, err)
}

// listOrgRevisions answers GET /revisions?state=stopped: the org's stopped
// revisions, most recently stopped first. state is required: stopped is
// the one state listed across the org (the revisions a person may
// re-enqueue).
func (a *API) listOrgRevisions(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	rv, err := a.revisions()
	if err != nil {
		return err
	}
	q := newQuery(r.URL.RawQuery, append(pageParams, "state")...)
	if _, given := q.v["state"]; !given {
		q.fail("state", "is required: one of stopped")
	} else {
		q.oneOf("state", string(space.RevisionStopped))
	}
	scope := strings.Join([]string{"revisions", p.OrgID, "state=stopped"}, "|")
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := rv.Stopped(r.Context(), p.OrgID, page)
	return writeList(a, w, r, scope, items, after, err)
}
