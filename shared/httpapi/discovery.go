package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// Discovery is what the routes that reach into clusters and clouds need:
// namespace discovery (client-go, shared/kubens) and the cluster picker (the
// cloud SDKs). Only ports are named here, so that the catalog API, which
// serves none of these routes, links neither (functions/discovery does).
type Discovery struct {
	Namespaces interface {
		List(ctx context.Context, org, spaceID string) (space.NamespaceList, error)
		Create(ctx context.Context, org, spaceID string, in space.NewNamespace) (space.NamespaceCreated, error)
	}
	Clusters space.ClusterLister
	// Claims finds the org's spaces holding cluster identities
	// (dynamostore.Store.ClaimHolders).
	Claims interface {
		ClaimHolders(ctx context.Context, org string, identities []string) (map[string]string, error)
	}
}

func (a *API) discovery() (*Discovery, error) {
	if a.Discovery == nil || a.Discovery.Namespaces == nil || a.Discovery.Clusters == nil || a.Discovery.Claims == nil {
		return nil, space.Errorf(space.KindUnavailable, "cluster discovery is not configured")
	}
	return a.Discovery, nil
}

// namespaces is the discovery for the namespace routes, which an agent
// space's agent serves even where no cloud is reachable.
func (a *API) namespaces() (*Discovery, error) {
	if a.Discovery == nil || a.Discovery.Namespaces == nil {
		return nil, space.Errorf(space.KindUnavailable, "cluster discovery is not configured")
	}
	return a.Discovery, nil
}

// listNamespaces: GET /space-discovery/{spaceID}/namespaces.
func (a *API) listNamespaces(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	d, err := a.namespaces()
	if err != nil {
		return err
	}
	if err := newQuery(r.URL.RawQuery).err(); err != nil {
		return err
	}
	id := r.PathValue("spaceID")
	addLogAttrs(r.Context(), slog.String("space_id", id))
	if !space.ValidID(id) {
		return space.ErrNotFound("space")
	}
	list, err := d.Namespaces.List(r.Context(), p.OrgID, id)
	if err != nil {
		return err
	}
	if list.Items == nil {
		list.Items = []space.Namespace{}
	}
	writeJSON(w, http.StatusOK, "application/json", list)
	return nil
}

// createNamespace: POST /space-discovery/{spaceID}/namespaces.
func (a *API) createNamespace(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	d, err := a.namespaces()
	if err != nil {
		return err
	}
	id := r.PathValue("spaceID")
	addLogAttrs(r.Context(), slog.String("space_id", id))
	var in space.NewNamespace
	if err := readObject(w, r, map[string]any{"name": &in.Name, "labels": &in.Labels}); err != nil {
		return err
	}
	if !space.ValidID(id) {
		return space.ErrNotFound("space")
	}
	c, err := d.Namespaces.Create(r.Context(), p.OrgID, id, in)
	if err != nil {
		return err
	}
	if c.Pending != nil {
		// An agent space: recorded for its agent, which creates it on its
		// next lease renewal; the list shows it once the agent reports.
		w.Header().Set("Location", "/space-discovery/"+id+"/namespaces")
		writeJSON(w, http.StatusAccepted, "application/json", c.Pending)
		return nil
	}
	w.Header().Set("Location", "/space-discovery/"+id+"/namespaces/"+c.Namespace.Name)
	writeJSON(w, http.StatusCreated, "application/json", c.Namespace)
	return nil
}
