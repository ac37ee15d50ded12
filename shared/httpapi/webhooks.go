package httpapi

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"spaces/shared/auth"
	"spaces/shared/space"
)

// Webhook endpoints: an org's receivers of signed events (space.Webhooks).
// A secret is answered twice only: by the creation and by a rotation.

func (a *API) webhooks() (*space.Webhooks, error) {
	if a.Webhooks == nil {
		return nil, space.Errorf(space.KindUnavailable, "webhook endpoints are not configured")
	}
	return a.Webhooks, nil
}

// webhookChange is what every change of one endpoint starts with: the use
// case, and the optional If-Match version.
func (a *API) webhookChange(r *http.Request) (*space.Webhooks, int64, error) {
	wh, err := a.webhooks()
	if err != nil {
		return nil, 0, err
	}
	version, err := ifMatch(r, false)
	return wh, version, err
}

// webhookInput reads an endpoint's settable fields; on a PATCH an absent
// field is left as it is.
func webhookInput(w http.ResponseWriter, r *http.Request) (space.WebhookInput, error) {
	var in space.WebhookInput
	var types *[]string
	if err := readObject(w, r, map[string]any{"url": &in.URL, "description": &in.Description,
		"event_types": &types, "label_selector": &in.LabelSelector}); err != nil {
		return in, err
	}
	if types != nil {
		in.EventTypes = make([]space.EventType, len(*types))
		for i, t := range *types {
			in.EventTypes[i] = space.EventType(t)
		}
	}
	return in, nil
}

func (a *API) createWebhook(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, err := a.webhooks()
	if err != nil {
		return err
	}
	in, err := webhookInput(w, r)
	if err != nil {
		return err
	}
	c, err := wh.Create(r.Context(), p.OrgID, in)
	if err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("webhook_id", c.ID))
	w.Header().Set("Location", "/webhook-endpoints/"+c.ID)
	w.Header().Set("ETag", etag(c.Version))
	w.Header().Set("Cache-Control", "no-store") // the secret is in the body
	writeJSON(w, http.StatusCreated, "application/json", c)
	return nil
}

func (a *API) listWebhooks(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, err := a.webhooks()
	if err != nil {
		return err
	}
	q := newQuery(r.URL.RawQuery, pageParams...)
	scope := strings.Join([]string{"webhook-endpoints", p.OrgID}, "|")
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := wh.List(r.Context(), p.OrgID, page)
	return writeList(a, w, r, scope, items, after, err)
}

// webhookDeliveries answers an endpoint's delivery log, newest first,
// paged with a cursor bound to the org and the endpoint.
func (a *API) webhookDeliveries(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, err := a.webhooks()
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	q := newQuery(r.URL.RawQuery, pageParams...)
	scope := strings.Join([]string{"webhook-deliveries", p.OrgID, id}, "|")
	page := a.page(q, scope)
	if err := q.err(); err != nil {
		return err
	}
	items, after, err := wh.Deliveries(r.Context(), p.OrgID, id, page)
	return writeList(a, w, r, scope, items, after, err)
}

// testWebhook queues a webhook.test event for the endpoint and answers 202
// with its webhook-id: delivery follows on the queue, like any event's.
func (a *API) testWebhook(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, err := a.webhooks()
	if err != nil {
		return err
	}
	id, err := wh.SendTest(r.Context(), p.OrgID, r.PathValue("id"))
	if err != nil {
		return err
	}
	addLogAttrs(r.Context(), slog.String("webhook_id", id))
	writeJSON(w, http.StatusAccepted, "application/json", testAccepted{WebhookID: id})
	return nil
}

// replayWebhookDelivery queues one delivered event again, under its
// original webhook-id, and answers 202.
func (a *API) replayWebhookDelivery(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, err := a.webhooks()
	if err != nil {
		return err
	}
	out, err := wh.Replay(r.Context(), p.OrgID, r.PathValue("id"), r.PathValue("delivery_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, "application/json", out)
	return nil
}

// replayWebhookSince queues again every event delivered to the endpoint
// since a time ({"since": RFC 3339}), up to space.MaxReplay, and answers
// 202 with their webhook-ids and where to continue.
func (a *API) replayWebhookSince(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, err := a.webhooks()
	if err != nil {
		return err
	}
	var since *string
	if err := readObject(w, r, map[string]any{"since": &since}); err != nil {
		return err
	}
	var at time.Time
	if since != nil {
		t, err := time.Parse(time.RFC3339Nano, *since)
		if err != nil {
			return &space.Error{Kind: space.KindInvalid, Message: "the replay is not valid",
				Fields: []space.FieldError{{Field: "since", Reason: "must be an RFC 3339 time"}}}
		}
		at = t
	}
	out, err := wh.ReplaySince(r.Context(), p.OrgID, r.PathValue("id"), at)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, "application/json", out)
	return nil
}

// testAccepted answers a queued test event.
type testAccepted struct {
	WebhookID string `json:"webhook_id"`
}

func (a *API) getWebhook(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, err := a.webhooks()
	if err != nil {
		return err
	}
	e, err := wh.Get(r.Context(), p.OrgID, r.PathValue("id"))
	return writeWebhook(w, http.StatusOK, e, err)
}

// patchWebhook changes the fields the body names; If-Match is optional.
func (a *API) patchWebhook(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, version, err := a.webhookChange(r)
	if err != nil {
		return err
	}
	in, err := webhookInput(w, r)
	if err != nil {
		return err
	}
	e, err := wh.Update(r.Context(), p.OrgID, r.PathValue("id"), version, in)
	return writeWebhook(w, http.StatusOK, e, err)
}

func (a *API) deleteWebhook(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, version, err := a.webhookChange(r)
	if err != nil {
		return err
	}
	if err := wh.Delete(r.Context(), p.OrgID, r.PathValue("id"), version); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) pauseWebhook(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return a.setWebhookState(w, r, p, space.WebhookPaused)
}

// resumeWebhook enables a paused endpoint, or one Spaces disabled.
func (a *API) resumeWebhook(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return a.setWebhookState(w, r, p, space.WebhookEnabled)
}

func (a *API) setWebhookState(w http.ResponseWriter, r *http.Request, p auth.Principal, state space.WebhookState) error {
	wh, version, err := a.webhookChange(r)
	if err != nil {
		return err
	}
	e, err := wh.SetState(r.Context(), p.OrgID, r.PathValue("id"), version, state)
	return writeWebhook(w, http.StatusOK, e, err)
}

// rotateWebhookSecret answers the new secret, this once; the replaced one
// keeps signing for space.WebhookRotationOverlap.
func (a *API) rotateWebhookSecret(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	wh, version, err := a.webhookChange(r)
	if err != nil {
		return err
	}
	c, err := wh.Rotate(r.Context(), p.OrgID, r.PathValue("id"), version)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(c.Version))
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, "application/json", c)
	return nil
}

func writeWebhook(w http.ResponseWriter, status int, e space.WebhookEndpoint, err error) error {
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(e.Version))
	writeJSON(w, status, "application/json", e)
	return nil
}
