package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spaces/shared/kubeapply"
	"spaces/shared/space"
)

// The cluster-side work of the agent's space (ARCHITECTURE.md, "Agent
// spaces"): each lease answer carries what waits for it — namespace
// creates, whether Spaces wants the namespace list, revisions to apply —
// and the agent does it as its ServiceAccount and reports each result on
// its own route, authenticated like the lease. A report that does not
// arrive is no loss: the work stays pending in Spaces and comes back with
// the next renewal (a create of an existing namespace and a server-side
// apply repeated are harmless), so it is done at least once.

// Report bounds (space.MaxReportedNamespaces, MaxNamespacesReportBody):
// a cluster with more is reported by its first namespaces, by name.
const (
	maxReportedNamespaces = 1000
	maxReportBody         = 250 << 10
)

// doWork carries out w. Only ErrRefused (the credential is refused: the
// agent stops) is returned; every other failure is logged and retried by
// the work coming back.
func (cfg *Config) doWork(ctx context.Context, api *spacesAPI, st state, w space.AgentWork) error {
	log := cfg.Log
	var outcomes []space.CreateOutcome
	for _, c := range w.NamespaceCreates {
		o := space.CreateOutcome{Name: c.Name}
		if why := cfg.refuseCreate(c); why != "" {
			o.Error = why
		} else {
			_, err := cfg.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: space.NamespaceLabels(c.Labels)}},
				metav1.CreateOptions{FieldManager: kubeapply.FieldManager})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				o.Error = err.Error()
			}
		}
		outcomes = append(outcomes, o)
		log.Info("namespace create", "name", c.Name, "error", o.Error)
	}
	if w.NamespacesWanted || len(outcomes) > 0 {
		items, err := cfg.listNamespaces(ctx)
		if err != nil {
			log.Warn("cannot list the namespaces; retried on the next renewal", "error", err.Error())
		} else if err := api.reportNamespaces(ctx, st.Credential, st.SpaceID, items, outcomes); errors.Is(err, ErrRefused) {
			return err
		} else if err != nil {
			log.Warn("cannot report the namespaces; retried on the next renewal", "error", err.Error())
		}
	}
	for _, r := range w.Revisions {
		msg := ""
		if cfg.KubeConfig == nil {
			msg = "the agent has no cluster configuration to apply with"
		} else if err := (&kubeapply.Applier{Refuse: []string{cfg.Namespace}}).ApplyConfig(ctx, cfg.KubeConfig, r.Namespace, r.Manifests); apierrors.IsForbidden(err) {
			msg = err.Error() + "; " + forbiddenHint
		} else if err != nil {
			msg = err.Error()
		}
		err := api.reportRevision(ctx, st.Credential, st.SpaceID, r.ID, r.Version, msg)
		var he *httpError
		switch {
		case errors.Is(err, ErrRefused):
			return err
		case errors.As(err, &he) && he.status == http.StatusConflict:
			// Reported before (a report whose answer was lost), or the
			// revision moved on: nothing to do.
		case err != nil:
			log.Warn("cannot report a revision; retried on the next renewal", "revision_id", r.ID, "error", err.Error())
		default:
			log.Info("revision applied", "revision_id", r.ID, "version", r.Version, "error", msg)
		}
	}
	return nil
}

// forbiddenHint ends a revision the cluster refused to the agent's
// ServiceAccount: its rights are the workload kinds of the ClusterRole
// spaces-agent-apply, bound only in namespaces the cluster's owner opted
// in (agent/README.md, "Least privilege").
const forbiddenHint = "the agent may apply only the kinds its ClusterRole spaces-agent-apply lists, and only in a namespace its owner opted in " +
	"(a RoleBinding spaces-agent-apply there: kubectl create rolebinding spaces-agent-apply --clusterrole=spaces-agent-apply " +
	"--serviceaccount=<agent namespace>:spaces-agent --namespace=<namespace>)"

// refuseCreate says why the agent refuses a namespace create whatever
// Spaces asked (Spaces refuses the same before it records one): a
// reserved name, its own namespace, or a label below Pod Security
// baseline. "" means create it, with space.NamespaceLabels.
func (cfg *Config) refuseCreate(c space.NamespaceCreate) string {
	if why := space.ReservedNamespace(c.Name); why != "" {
		return "refused by the agent: namespace " + c.Name + " " + why
	}
	if c.Name == cfg.Namespace {
		return "refused by the agent: namespace " + c.Name + " is its own"
	}
	var fe []space.FieldError
	space.CheckNamespaceLabels(&fe, "labels", c.Labels)
	if len(fe) > 0 {
		return "refused by the agent: " + fe[0].Field + " " + fe[0].Reason
	}
	return ""
}

// listNamespaces reads the cluster's namespaces as the report carries them.
func (cfg *Config) listNamespaces(ctx context.Context) ([]space.Namespace, error) {
	list, err := cfg.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	out := make([]space.Namespace, 0, len(list.Items))
	for _, ns := range list.Items {
		labels := ns.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		out = append(out, space.Namespace{Name: ns.Name, Phase: string(ns.Status.Phase), Labels: labels, CreatedAt: ns.CreationTimestamp.UTC()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return fitReport(out), nil
}

// fitReport keeps the first namespaces, by name, that the report's bounds
// take.
func fitReport(items []space.Namespace) []space.Namespace {
	if len(items) > maxReportedNamespaces {
		items = items[:maxReportedNamespaces]
	}
	size := 0
	for i, n := range items {
		b, _ := json.Marshal(n)
		if size += len(b) + 1; size > maxReportBody-4096 {
			return items[:i]
		}
	}
	return items
}

func (c *spacesAPI) reportNamespaces(ctx context.Context, cred, spaceID string, items []space.Namespace, creates []space.CreateOutcome) error {
	if creates == nil {
		creates = []space.CreateOutcome{}
	}
	body := map[string]any{"items": items, "creates": creates}
	return c.call(ctx, "report the namespaces", http.MethodPut, "agent/spaces/"+url.PathEscape(spaceID)+"/namespaces", cred, body, nil)
}

func (c *spacesAPI) reportRevision(ctx context.Context, cred, spaceID, revID string, version int64, msg string) error {
	body := map[string]any{"version": version, "error": msg}
	return c.call(ctx, "report a revision", http.MethodPut,
		"agent/spaces/"+url.PathEscape(spaceID)+"/revisions/"+url.PathEscape(revID), cred, body, nil)
}
