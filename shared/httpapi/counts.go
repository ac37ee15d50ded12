package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"

	"spaces/shared/auth"
)

// spaceCounts answers the fleet's counts in one request (space.Counts). It
// takes no parameters; like a list page, it carries a weak ETag of its body
// so that a console polling with If-None-Match gets a 304 while nothing
// changed.
func (a *API) spaceCounts(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := newQuery(r.URL.RawQuery).err(); err != nil {
		return err
	}
	c, err := a.Spaces.Counts(r.Context(), p.OrgID)
	if err != nil {
		return err
	}
	body, err := json.Marshal(c) // maps marshal in key order: one body per state
	if err != nil {
		return err
	}
	body = append(body, '\n')
	sum := sha256.Sum256(body)
	tag := `W/"c-` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
	writeTagged(w, r, tag, body)
	return nil
}
