package httpapi

import (
	"log/slog"
	"net/http"
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
	var body jobBody
	nulls, err := readStruct(w, r, &body)
	if err != nil {
		return err
	}
	in := provisioning.Input{Name: body.Name, Provider: body.Provider, CloudAccountID: body.CloudAccountID,
		Config: body.Config, Spec: body.Spec, Null: nulls}
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

// jobBody is the body of POST /provisioning-jobs: the spec is the domain's
// own type, so every field it has is a field the body takes (readStruct).
type jobBody struct {
	Name           string            `json:"name"`
	Provider       space.Provider    `json:"provider"`
	CloudAccountID string            `json:"cloud_account_id"`
	Config         space.Config      `json:"config"`
	Spec           space.ClusterSpec `json:"spec"`
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
