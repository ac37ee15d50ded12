package client

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"spaces/shared/space"
)

// nodesRecheck is how often an agent that may not list nodes (installed
// before its ClusterRole granted it) asks again, silently: one call an
// hour, so that re-applied manifests take effect without a restart.
const nodesRecheck = time.Hour

// nodeWatch keeps the cluster's nodes for the lease report
// (space.Nodes: a count per kubelet version, never a name). An informer
// lists them once and then watches: one long request, re-opened by
// client-go, so a lease costs the API server nothing; of each node only its
// name and kubelet version are kept in memory (the transform), not the Node.
// Without the permission (an install older than the ClusterRole's
// list/watch on nodes) it logs one line and reports no nodes; the
// agent carries on.
type nodeWatch struct {
	kube  kubernetes.Interface
	log   *slog.Logger
	clock Clock

	mu        sync.Mutex
	informer  cache.SharedIndexInformer
	checkedAt time.Time // the last check of the permission, while denied
	logged    bool      // the one line about a missing permission is written
}

func newNodeWatch(kube kubernetes.Interface, log *slog.Logger, clock Clock) *nodeWatch {
	return &nodeWatch{kube: kube, log: log, clock: clock}
}

// current is the nodes as the watch holds them: nil until its first list
// is in, and while nodes may not be listed. The first call starts the
// watch (ctx bounds it).
func (w *nodeWatch) current(ctx context.Context) *space.Nodes {
	if w == nil || w.kube == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.informer == nil && !w.start(ctx) {
		return nil
	}
	if !w.informer.HasSynced() {
		return nil
	}
	var versions []string
	for _, o := range w.informer.GetStore().List() {
		if n, ok := o.(*corev1.Node); ok {
			versions = append(versions, n.Status.NodeInfo.KubeletVersion)
		}
	}
	n := space.CountNodes(versions)
	return &n
}

// start checks that nodes may be listed (one list of at most one node),
// then starts the informer. false: not now (denied, or the API server
// failed), asked again after nodesRecheck.
func (w *nodeWatch) start(ctx context.Context) bool {
	now := w.clock.Now()
	if !w.checkedAt.IsZero() && now.Sub(w.checkedAt) < nodesRecheck {
		return false
	}
	w.checkedAt = now
	if _, err := w.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		if !w.logged {
			w.logged = true
			msg := "cannot list the cluster's nodes; reporting no node count (asked again every hour)"
			if apierrors.IsForbidden(err) {
				msg = "the agent may not list nodes (its ClusterRole predates list/watch on nodes: re-apply spaces-agent.yaml); reporting no node count"
			}
			w.log.Warn(msg, "error", err.Error())
		}
		return false
	}
	f := informers.NewSharedInformerFactory(w.kube, 0)
	inf := f.Core().V1().Nodes().Informer()
	// Keep only what the report reads.
	_ = inf.SetTransform(func(o any) (any, error) {
		n, ok := o.(*corev1.Node)
		if !ok {
			return o, nil
		}
		slim := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}
		slim.Status.NodeInfo.KubeletVersion = n.Status.NodeInfo.KubeletVersion
		return slim, nil
	})
	// client-go retries a failed list or watch with backoff; one line,
	// not one per retry.
	var once sync.Once
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		once.Do(func() {
			w.log.Warn("the node watch failed; client-go retries it (further failures not logged)", "error", err.Error())
		})
	})
	f.Start(ctx.Done())
	w.informer = inf
	w.log.Info("watching the cluster's nodes for the node count")
	return true
}
