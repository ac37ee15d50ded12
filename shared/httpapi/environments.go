package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// Environments and autoscaler policies (bindings to spaces); the rules are
// the domain's (space.Bindings).

func (a *API) bindings() (*space.Bindings, error) {
	if a.Bindings == nil {
		return nil, space.Errorf(space.KindUnavailable, "environments and autoscaler policies are not configured")
	}
	return a.Bindings, nil
}

func (a *API) createEnvironment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := a.bindings()
	if err != nil {
		return err
	}
	var in space.NewEnvironmentInput
	if err := readObject(w, r, map[string]any{"name": &in.Name, "space_id": &in.SpaceID, "namespace": &in.Namespace}); err != nil {
		return err
	}
	e, err := b.CreateEnvironment(r.Context(), p.OrgID, in)
	if err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("environment_id", e.ID))
	w.Header().Set("Location", "/environments/"+e.ID)
	writeVersioned(w, http.StatusCreated, e.Version, e)
	return nil
}

func (a *API) listEnvironments(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := a.bindings()
	if err != nil {
		return err
	}
	q := newQuery(r.URL.RawQuery, pageParams...)
	scope := strings.Join([]string{"environments", p.OrgID}, "|")
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := b.ListEnvironments(r.Context(), p.OrgID, page)
	return writeList(a, w, r, scope, items, after, err)
}

func (a *API) getEnvironment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := a.bindings()
	if err != nil {
		return err
	}
	e, err := b.GetEnvironment(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, e.Version, e)
	return nil
}

func (a *API) rebindEnvironment(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := a.bindings()
	if err != nil {
		return err
	}
	version, err := ifMatch(r, false)
	if err != nil {
		return err
	}
	var spaceID string
	if err := readObject(w, r, map[string]any{"space_id": &spaceID}); err != nil {
		return err
	}
	e, err := b.Rebind(r.Context(), p.OrgID, r.PathValue("id"), spaceID, version)
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, e.Version, e)
	return nil
}

// policyTarget is the request form of a policy's target: every field a
// string, no other field.
type policyTarget struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
}

// UnmarshalJSON refuses unknown fields and fields that are not strings.
// Keys are matched exactly: encoding/json would match struct fields
// case-insensitively and accept {"NAME": ...}.
func (t *policyTarget) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	dst := map[string]*string{"namespace": &t.Namespace, "kind": &t.Kind, "name": &t.Name}
	for k, v := range m {
		p, ok := dst[k]
		if !ok {
			return fmt.Errorf("unknown field %q", k)
		}
		if err := json.Unmarshal(v, p); err != nil {
			return err
		}
	}
	return nil
}

func (a *API) createPolicy(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := a.bindings()
	if err != nil {
		return err
	}
	var in space.NewPolicyInput
	var target *policyTarget
	if err := readObject(w, r, map[string]any{
		"space_id": &in.SpaceID, "target": &target, "min_replicas": &in.MinReplicas, "max_replicas": &in.MaxReplicas,
	}); err != nil {
		return err
	}
	if target != nil {
		in.Target = space.PolicyTarget(*target)
	}
	pol, err := b.CreatePolicy(r.Context(), p.OrgID, in)
	if err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("policy_id", pol.ID))
	w.Header().Set("Location", "/autoscaler-policies/"+pol.ID)
	writeVersioned(w, http.StatusCreated, pol.Version, pol)
	return nil
}

func (a *API) listPolicies(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := a.bindings()
	if err != nil {
		return err
	}
	q := newQuery(r.URL.RawQuery, pageParams...)
	scope := strings.Join([]string{"autoscaler-policies", p.OrgID}, "|")
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := b.ListPolicies(r.Context(), p.OrgID, page)
	return writeList(a, w, r, scope, items, after, err)
}

func (a *API) getPolicy(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := a.bindings()
	if err != nil {
		return err
	}
	pol, err := b.GetPolicy(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, pol.Version, pol)
	return nil
}

// deletePolicy deletes a policy, applied or detached; with If-Match only
// at that version.
func (a *API) deletePolicy(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	b, err := a.bindings()
	if err != nil {
		return err
	}
	version, err := ifMatch(r, false)
	if err != nil {
		return err
	}
	if err := b.DeletePolicy(r.Context(), p.OrgID, r.PathValue("id"), version); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func writeVersioned(w http.ResponseWriter, status int, version int64, v any) {
	w.Header().Set("ETag", etag(version))
	writeJSON(w, status, "application/json", v)
}
