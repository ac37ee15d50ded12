package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"spaces/shared/auth"
	"spaces/shared/provisioning"
	"spaces/shared/space"
)

// Provisioning jobs: created here, stepped by functions/provisioner; the
// rules are the domain's (shared/provisioning).

func (a *API) jobs() (*provisioning.Jobs, error) {
	if a.Jobs == nil || a.Jobs.Queue == nil {
		return nil, space.Errorf(space.KindUnavailable, "provisioning jobs are not configured")
	}
	return a.Jobs, nil
}

func (a *API) createJob(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	js, err := a.jobs()
	if err != nil {
		return err
	}
	key := strings.Join(r.Header.Values("Idempotency-Key"), ",")
	if key != "" && !idempotencyKey.MatchString(key) {
		return &space.Error{Kind: space.KindMalformed, Message: "the Idempotency-Key header is not valid",
			Fields: []space.FieldError{{Field: "Idempotency-Key", Reason: "must be 1-255 printable ASCII characters without spaces"}}}
	}
	var in provisioning.Input
	var provider string
	var spec json.RawMessage
	if err := readObject(w, r, map[string]any{
		"name": &in.Name, "provider": &provider, "cloud_account_id": &in.CloudAccountID, "config": &in.Config, "spec": &spec,
	}); err != nil {
		return err
	}
	in.Provider = space.Provider(provider)
	var bad []space.FieldError
	in.Spec, bad = decodeSpec(spec)
	if len(bad) > 0 {
		return &space.Error{Kind: space.KindMalformed, Message: "the request body has unknown or mistyped fields", Fields: bad}
	}
	j, replayed, err := js.Create(r.Context(), p.OrgID, in, key)
	if err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("job_id", j.ID))
	status := http.StatusCreated
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Location", "/provisioning-jobs/"+j.ID)
	writeVersioned(w, status, j.Version, j)
	return nil
}

// decodeSpec reads the spec object strictly: an unknown or mistyped field
// anywhere in it is named (readObject checks the top level only).
func decodeSpec(raw json.RawMessage) (space.ClusterSpec, []space.FieldError) {
	var s space.ClusterSpec
	if len(raw) == 0 || string(raw) == "null" {
		return s, nil // every required spec field is then reported as missing
	}
	var pool, network json.RawMessage
	bad := strictObject("spec", raw, map[string]any{
		"kubernetes_version": &s.KubernetesVersion, "node_pool": &pool, "network": &network, "tags": &s.Tags,
	})
	if len(pool) > 0 && string(pool) != "null" {
		bad = append(bad, strictObject("spec.node_pool", pool, map[string]any{
			"machine_type": &s.NodePool.MachineType, "min_nodes": &s.NodePool.Min,
			"max_nodes": &s.NodePool.Max, "desired_nodes": &s.NodePool.Desired,
		})...)
	}
	if len(network) > 0 && string(network) != "null" {
		n := &s.Network
		bad = append(bad, strictObject("spec.network", network, map[string]any{
			"subnet_ids": &n.SubnetIDs, "security_group_ids": &n.SecurityGroupIDs, "network": &n.Network,
			"subnetwork": &n.Subnetwork, "location": &n.Location, "vnet_subnet_id": &n.VNetSubnetID,
		})...)
	}
	return s, bad
}

func strictObject(prefix string, raw json.RawMessage, fields map[string]any) []space.FieldError {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return []space.FieldError{{Field: prefix, Reason: "must be an object"}}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var bad []space.FieldError
	for _, k := range keys {
		dst, ok := fields[k]
		if !ok {
			bad = append(bad, space.FieldError{Field: prefix + "." + k, Reason: "is not a known field"})
			continue
		}
		if err := json.NewDecoder(bytes.NewReader(m[k])).Decode(dst); err != nil {
			bad = append(bad, space.FieldError{Field: prefix + "." + k, Reason: specTypeReason(dst)})
		}
	}
	return bad
}

func specTypeReason(dst any) string {
	switch dst.(type) {
	case *[]string:
		return "must be an array of strings"
	case *json.RawMessage:
		return "must be an object"
	default:
		return typeReason(dst)
	}
}

func (a *API) listJobs(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	js, err := a.jobs()
	if err != nil {
		return err
	}
	q := newQuery(r.URL.RawQuery, pageParams...)
	scope := strings.Join([]string{"provisioning-jobs", p.OrgID}, "|")
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := js.List(r.Context(), p.OrgID, page)
	return writeList(a, w, r, scope, items, after, err)
}

func (a *API) getJob(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	js, err := a.jobs()
	if err != nil {
		return err
	}
	j, err := js.Get(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, j.Version, j)
	return nil
}

func (a *API) retryJob(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	js, err := a.jobs()
	if err != nil {
		return err
	}
	j, err := js.Retry(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusAccepted, j.Version, j)
	return nil
}

func (a *API) cancelJob(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	js, err := a.jobs()
	if err != nil {
		return err
	}
	j, err := js.Cancel(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeVersioned(w, http.StatusOK, j.Version, j)
	return nil
}
