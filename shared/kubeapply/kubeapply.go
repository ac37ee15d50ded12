// Package kubeapply applies manifests to a space's cluster with server-side
// apply (field manager "spaces") through client-go's dynamic client, with
// freshly minted credentials and a short timeout per call. The agent
// (spaces/agent) applies through it too (ApplyConfig): it imports only
// client-go, shared/kubecred (the standard library) and the domain's
// namespace rule (space.ReservedNamespace), no AWS.
package kubeapply

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"spaces/shared/kubecred"
	"spaces/shared/space"
)

// FieldManager owns the fields Spaces applies.
const FieldManager = "spaces"

// DefaultTimeout bounds one cluster call.
const DefaultTimeout = 10 * time.Second

// Applier applies manifests. The zero Timeout means DefaultTimeout.
type Applier struct {
	Timeout time.Duration
	// Refuse names namespaces refused besides space.ReservedNamespace's
	// (the agent's own, wherever it is installed).
	Refuse []string
}

// Apply server-side-applies each manifest in order into namespace (a
// reserved namespace, a cluster-scoped kind or a manifest naming another
// namespace is refused before any write). The apply is never forced: a
// field another field manager owns is a conflict, refused with the
// owner's name, not taken over. The first error stops it and carries the
// cluster's message.
func (a *Applier) Apply(ctx context.Context, c kubecred.Credentials, namespace string, manifests []map[string]any) error {
	return a.ApplyConfig(ctx, &rest.Config{
		Host: c.Server, BearerToken: c.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData},
		UserAgent: "spaces-revisions",
	}, namespace, manifests)
}

// ApplyConfig is Apply as whoever cfg names: the agent (spaces/agent)
// applies a revision handed to it with its ServiceAccount's in-cluster
// configuration through this same code, so that both paths decide alike
// (field manager, the namespace rules, the error messages that become a
// failed revision's reason).
func (a *Applier) ApplyConfig(ctx context.Context, base *rest.Config, namespace string, manifests []map[string]any) error {
	if why := space.ReservedNamespace(namespace); why != "" {
		return fmt.Errorf("namespace %q %s", namespace, why)
	}
	if slices.Contains(a.Refuse, namespace) {
		return fmt.Errorf("namespace %q is the Spaces agent's own namespace; it applies nothing there", namespace)
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cfg := rest.CopyConfig(base)
	cfg.Timeout, cfg.QPS = timeout, -1
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	// Discover every group first: the RESTMapper drops a group whose
	// discovery failed (a timeout, a 503) and then answers "no matches for
	// kind", which reads as a wrong manifest when the cluster only failed
	// to answer (TestApplySaysDiscoveryFailed).
	cached := memory.NewMemCacheClient(dc)
	if _, _, err := cached.ServerGroupsAndResources(); err != nil {
		return fmt.Errorf("the cluster did not say which kinds it serves: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for i, m := range manifests {
		obj := &unstructured.Unstructured{Object: m}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
		if err != nil {
			return fmt.Errorf("manifest %d (%s %s): %w", i, gvk.Kind, obj.GetName(), err)
		}
		// A revision must not escape its environment: the cluster, not a
		// list of kinds, says what is cluster-scoped (custom kinds too).
		if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
			return fmt.Errorf("manifest %d (%s %s): the kind is cluster-scoped; a revision may only hold objects in the environment's namespace %q", i, gvk.Kind, obj.GetName(), namespace)
		}
		if ns := obj.GetNamespace(); ns != "" && ns != namespace {
			return fmt.Errorf("manifest %d (%s %s): namespace %q is not the environment's namespace %q", i, gvk.Kind, obj.GetName(), ns, namespace)
		}
		obj.SetNamespace(namespace)
		ri := dyn.Resource(mapping.Resource).Namespace(namespace)
		body, err := json.Marshal(obj.Object)
		if err != nil {
			return fmt.Errorf("manifest %d: %w", i, err)
		}
		// Never Force: an object (or a field of one) that someone else
		// manages stays theirs (https://kubernetes.io/docs/reference/using-api/server-side-apply/#conflicts).
		_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		if apierrors.IsConflict(err) {
			return fmt.Errorf("manifest %d (%s %s): another field manager owns fields it sets, and Spaces never overwrites them: "+
				"leave those fields out of the revision, or have their owner give them up: %w", i, gvk.Kind, obj.GetName(), err)
		}
		if err != nil {
			return fmt.Errorf("manifest %d (%s %s): %w", i, gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}
