package httpapi

import (
	"log/slog"
	"net/http"
	"strings"

	"spaces/shared/auth"
	"spaces/shared/space"
)

func (a *API) createAccount(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var in space.NewAccountInput
	var provider string
	if err := readObject(w, r, map[string]any{"provider": &provider, "name": &in.Name, "connection": &in.Connection}); err != nil {
		return err
	}
	in.Provider = space.Provider(provider)
	acct, err := a.Spaces.CreateAccount(r.Context(), p.OrgID, in)
	if err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("cloud_account_id", acct.ID))
	w.Header().Set("Location", "/cloud-accounts/"+acct.ID)
	w.Header().Set("ETag", etag(acct.Version))
	writeJSON(w, http.StatusCreated, "application/json", acct)
	return nil
}

func (a *API) listAccounts(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := newQuery(r.URL.RawQuery, pageParams...)
	scope := strings.Join([]string{"cloud-accounts", p.OrgID}, "|")
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := a.Spaces.ListAccounts(r.Context(), p.OrgID, page)
	return writeList(a, w, r, scope, items, after, err)
}

func (a *API) getAccount(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	acct, err := a.Spaces.GetAccount(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(acct.Version))
	writeJSON(w, http.StatusOK, "application/json", acct)
	return nil
}

func (a *API) deleteAccount(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := a.Spaces.DeleteAccount(r.Context(), p.OrgID, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// verifyAccount: POST /cloud-accounts/{id}/verify — ask the customer's cloud
// again whether it trusts this org's identity: 200 with the ready account,
// 422 (reason from the cloud) with the account stored as failed, 503 when
// the cloud cannot tell (nothing changes).
func (a *API) verifyAccount(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	acct, err := a.Spaces.VerifyAccount(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(acct.Version))
	writeJSON(w, http.StatusOK, "application/json", acct)
	return nil
}
