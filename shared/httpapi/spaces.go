package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"spaces/shared/auth"
	"spaces/shared/space"
)

func (a *API) listSpaces(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := newQuery(r.URL.RawQuery, append(pageParams, "provider", "status", "space_type", "cloud_account_id", "picker",
		"name_prefix", "name_contains", "sort", "label_selector", "synthetic",
		"version", "support_ends_within_days", "certificate_expires_within_days")...)
	f := space.ListFilter{
		Provider:  oneOf(q, "provider", space.Providers),
		Status:    oneOf(q, "status", space.Statuses),
		SpaceType: q.oneOf("space_type", space.TypeKubernetes),
		Picker:    oneOf(q, "picker", space.Pickers),
		Sort:      oneOf(q, "sort", space.Sorts),
	}
	if id := q.get("cloud_account_id"); id != "" {
		if !space.ValidID(id) {
			q.fail("cloud_account_id", "must be a UUID")
		}
		f.CloudAccountID = id
	}
	for name, to := range map[string]*string{"name_prefix": &f.NamePrefix, "name_contains": &f.Search} {
		if _, given := q.v[name]; !given {
			continue
		}
		switch v := q.get(name); {
		case !space.ValidSearch(v):
			q.fail(name, "must be 1-100 characters without control, format or invisible characters")
		case name == "name_contains" && len(space.SearchWords(v)) == 0:
			// A search is by word prefix: separators alone ask for nothing.
			q.fail(name, "must hold a letter or a digit")
		default:
			*to = v
		}
	}
	if _, given := q.v["label_selector"]; given {
		sel, err := space.ParseSelector("label_selector", q.get("label_selector"))
		if err != nil {
			q.fail("label_selector", err.(*space.Error).Fields[0].Reason)
		}
		f.Selector = sel
	}
	if v := q.oneOf("synthetic", "true", "false"); v != "" {
		synthetic := v == "true"
		f.Synthetic = &synthetic
	}
	if _, given := q.v["version"]; given {
		v := q.get("version")
		if !space.ValidMinor(v) {
			q.fail("version", "must be a Kubernetes major.minor version such as 1.31")
		}
		f.Version = v
	}
	f.SupportEndsWithinDays = withinDays(q, "support_ends_within_days")
	f.CertificateExpiresWithinDays = withinDays(q, "certificate_expires_within_days")
	if f.NamePrefix != "" && f.Search != "" {
		q.fail("name_contains", "cannot be combined with name_prefix")
	}
	if f.Search != "" && f.Sort != "" {
		// The search reads its own index, in its own order; any other order
		// would read the whole org.
		q.fail("sort", "cannot be combined with name_contains, which lists in its own order: the word matched, then name")
	}
	// The search is part of the scope (quoted: it may hold "|"): a cursor
	// continues the listing it came from, never another search or order.
	scope := strings.Join([]string{"spaces", p.OrgID, string(f.Provider), string(f.Status), f.SpaceType, f.CloudAccountID, string(f.Picker),
		string(f.Sort), strconv.Quote(space.FoldName(f.NamePrefix)), strconv.Quote(space.FoldName(f.Search)),
		strconv.Quote(f.Selector.String()), q.get("synthetic"),
		f.Version, q.get("support_ends_within_days"), q.get("certificate_expires_within_days")}, "|")
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := a.Spaces.List(r.Context(), p.OrgID, f, page)
	return writeList(a, w, r, scope, a.spaceBodies(items), after, err)
}

// withinDays reads an optional "within N days" filter: a whole number of
// days from 0 to space.MaxWithinDays.
func withinDays(q *query, name string) *int {
	if _, given := q.v[name]; !given {
		return nil
	}
	n, err := strconv.Atoi(q.get(name))
	if err != nil || n < 0 || n > space.MaxWithinDays || strings.HasPrefix(q.get(name), "+") {
		q.fail(name, "must be a whole number of days from 0 to "+strconv.Itoa(space.MaxWithinDays))
		return nil
	}
	return &n
}

// spaceBody is a space as the API answers it: the stored space (as
// observed) and its facts as read now (space.Facts: the support state is
// computed at read time, never stored).
type spaceBody struct {
	space.Space
	Facts space.Facts `json:"facts"`
}

func (a *API) spaceBody(s space.Space) spaceBody {
	return spaceBody{Space: s, Facts: s.FactsAt(a.now())}
}

func (a *API) spaceBodies(ss []space.Space) []spaceBody {
	out := make([]spaceBody, len(ss))
	for i, s := range ss {
		out[i] = a.spaceBody(s)
	}
	return out
}

func (a *API) now() time.Time {
	if a.Spaces != nil && a.Spaces.Now != nil {
		return a.Spaces.Now()
	}
	return time.Now()
}

// idempotencyKey follows the IETF Idempotency-Key draft: an opaque string;
// printable ASCII keeps it safe to store and log.
var idempotencyKey = space.MustPattern(`^[\x21-\x7e]+$`, 255)

func (a *API) registerSpace(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	key := strings.Join(r.Header.Values("Idempotency-Key"), ",")
	if key != "" && !idempotencyKey.MatchString(key) {
		return &space.Error{Kind: space.KindMalformed, Message: "the Idempotency-Key header is not valid",
			Fields: []space.FieldError{{Field: "Idempotency-Key", Reason: "must be 1-255 printable ASCII characters without spaces"}}}
	}
	var in space.RegisterInput
	var provider string
	var labels map[string]string
	if err := readObject(w, r, map[string]any{
		"name": &in.Name, "provider": &provider, "space_type": &in.SpaceType,
		"cloud_account_id": &in.CloudAccountID, "config": &in.Config, "synthetic": &in.Synthetic,
		"connectivity": &in.Connectivity, "labels": &labels,
	}); err != nil {
		return err
	}
	in.Provider, in.Labels = space.Provider(provider), labels
	if in.Connectivity == space.ViaAgent && a.Agents == nil {
		return space.Errorf(space.KindUnavailable, "agent spaces are not served here")
	}
	s, replayed, err := a.Spaces.Register(r.Context(), p.OrgID, in, key)
	if err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("id", s.ID))
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	} else if a.Probes != nil {
		// Best effort: the next minute tick probes the space anyway.
		if err := a.Probes.ProbeRegistered(r.Context(), s); err != nil {
			logger(r.Context()).WarnContext(r.Context(), "cannot enqueue the registration probe", "error", err.Error())
		}
	}
	w.Header().Set("Location", "/spaces/"+s.ID)
	if s.Connectivity == space.ViaAgent {
		// Also on a replay: the first answer's token is not kept, so a
		// retry gets a fresh one and the earlier one stops working.
		b, err := a.Agents.IssueBootstrap(r.Context(), s)
		if err != nil {
			return err
		}
		w.Header().Set("ETag", etag(s.Version))
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, "application/json", registered{spaceBody: a.spaceBody(s), AgentBootstrap: answerBootstrap(b)})
		return nil
	}
	a.writeSpace(w, http.StatusCreated, s)
	return nil
}

func (a *API) getSpace(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	s, err := a.Spaces.Get(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	// The body is the stored version as observed now: the probe times
	// move with the shard's beat and the status with staleness, both
	// without a write. So the read's tag also names the probe time, and a
	// stale space is always answered whole.
	tag := readTag(s)
	w.Header().Set("ETag", tag)
	if s.Probe.Reason != space.ReasonProbeStale && noneMatch(r.Header.Values("If-None-Match"), tag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	writeJSON(w, http.StatusOK, "application/json", a.spaceBody(s))
	return nil
}

// readTag is a read's ETag: the version, and the last probe time when there
// is one ("7.1765000000"), which the beat moves at one version. If-Match
// takes either form and compares the version.
func readTag(s space.Space) string {
	if s.Probe.LastProbeAt == nil {
		return etag(s.Version)
	}
	return `"` + strconv.FormatInt(s.Version, 10) + "." + strconv.FormatInt(s.Probe.LastProbeAt.Unix(), 10) + `"`
}

func (a *API) patchStatus(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if !p.Has(auth.ScopeInternal) {
		return space.Errorf(space.KindForbidden, "setting a status needs the %s scope", auth.ScopeInternal)
	}
	version, err := ifMatch(r, true)
	if err != nil {
		return err
	}
	var status, reason string
	if err := readObject(w, r, map[string]any{"status": &status, "reason": &reason}); err != nil {
		return err
	}
	s, err := a.Spaces.SetStatus(r.Context(), p.OrgID, r.PathValue("id"), version, space.Status(status), reason)
	if err != nil {
		return err
	}
	a.writeSpace(w, http.StatusOK, s)
	return nil
}

// putLabels replaces a space's labels (the body's labels are the whole
// set: {} removes them all); If-Match is optional, as for DELETE.
func (a *API) putLabels(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	version, err := ifMatch(r, false)
	if err != nil {
		return err
	}
	var labels map[string]string
	if err := readObject(w, r, map[string]any{"labels": &labels}); err != nil {
		return err
	}
	if labels == nil {
		return &space.Error{Kind: space.KindInvalid, Message: "the labels are not valid",
			Fields: []space.FieldError{{Field: "labels", Reason: "is required: the whole set of labels, {} for none"}}}
	}
	s, err := a.Spaces.SetLabels(r.Context(), p.OrgID, r.PathValue("id"), version, labels)
	if err != nil {
		return err
	}
	a.writeSpace(w, http.StatusOK, s)
	return nil
}

func (a *API) deregisterSpace(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	version, err := ifMatch(r, false)
	if err != nil {
		return err
	}
	if err := a.Spaces.Deregister(r.Context(), p.OrgID, r.PathValue("id"), version, p.Subject); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) writeSpace(w http.ResponseWriter, status int, s space.Space) {
	w.Header().Set("ETag", etag(s.Version))
	writeJSON(w, status, "application/json", a.spaceBody(s))
}

func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }

// ifMatch reads the If-Match header as an item version; 0 means any ("*" or,
// when not required, absent). The header is read with Values because the
// API Gateway proxy splits header values on commas.
func ifMatch(r *http.Request, required bool) (int64, error) {
	vals := r.Header.Values("If-Match")
	if len(vals) == 0 {
		if required {
			return 0, space.Errorf(space.KindPreconditionRequired, "this request needs an If-Match header with the ETag of the space")
		}
		return 0, nil
	}
	var tags []string
	for _, v := range vals {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
	}
	if len(tags) == 1 && tags[0] == "*" {
		return 0, nil
	}
	if len(tags) == 1 && strings.HasPrefix(tags[0], "W/") {
		// RFC 9110 13.1.1: If-Match uses the strong comparison, so a weak
		// tag never matches.
		return 0, &space.Error{Kind: space.KindPreconditionFailed, Message: "a weak ETag never matches If-Match",
			Fields: []space.FieldError{{Field: "If-Match", Reason: `must be a strong ETag as returned by GET, such as "3", not W/"3"`}}}
	}
	if len(tags) == 1 {
		t := tags[0]
		if len(t) >= 3 && t[0] == '"' && t[len(t)-1] == '"' {
			// A read's tag may name its probe time after the version.
			num, probed, dotted := strings.Cut(t[1:len(t)-1], ".")
			if _, err := strconv.ParseInt(probed, 10, 64); dotted && err != nil {
				num = ""
			}
			if v, err := strconv.ParseInt(num, 10, 64); err == nil && v > 0 {
				return v, nil
			}
		}
	}
	return 0, &space.Error{Kind: space.KindMalformed, Message: "the If-Match header must be one ETag as returned by GET",
		Fields: []space.FieldError{{Field: "If-Match", Reason: `must be one quoted ETag such as "3"`}}}
}
