package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// maxActorLen bounds the actor filter: a subject is a token's sub claim.
const maxActorLen = 256

// listActivity answers a page of the org's audit trail, newest first,
// narrowed by actor, kind and space_id; a filter that is not valid is
// refused (400) rather than ignored, which would list more than asked.
func (a *API) listActivity(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if a.Activity == nil {
		return space.Errorf(space.KindUnavailable, "the activity feed is not configured")
	}
	q := newQuery(r.URL.RawQuery, append([]string{"actor", "kind", "space_id"}, pageParams...)...)
	aq := space.ActivityQuery{Actor: q.get("actor"), Kind: oneOf(q, "kind", space.ActivityKinds), SpaceID: q.get("space_id")}
	if _, set := q.v["actor"]; set && (aq.Actor == "" || len(aq.Actor) > maxActorLen) {
		q.fail("actor", "must be a subject of 1 to 256 characters")
	}
	if _, set := q.v["space_id"]; set && !space.ValidID(aq.SpaceID) {
		q.fail("space_id", "must be a space id (a UUID)")
	}
	// The actor quoted: a subject may hold the separator.
	scope := strings.Join([]string{"activity", p.OrgID, strconv.Quote(aq.Actor), string(aq.Kind), aq.SpaceID}, "|")
	aq.Page = a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := a.Activity.ListActivity(r.Context(), p.OrgID, aq)
	return writeList(a, w, r, scope, items, after, err)
}
