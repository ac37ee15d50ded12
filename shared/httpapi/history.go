package httpapi

import (
	"net/http"

	"spaces/shared/auth"
)

// statusHistory answers GET /spaces/{id}/status-history: the space's status
// transitions of the last 30 days, newest first, paged with limit and an
// opaque cursor bound to the org and the space.
func (a *API) statusHistory(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id := r.PathValue("id")
	q := newQuery(r.URL.RawQuery, pageParams...)
	scope := "status-history|" + p.OrgID + "|" + id
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := a.Spaces.History(r.Context(), p.OrgID, id, page)
	return writeList(a, w, r, scope, items, after, err)
}
