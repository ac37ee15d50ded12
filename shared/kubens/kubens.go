// Package kubens lists and creates namespaces on a space's cluster through
// client-go, with freshly minted credentials and a short timeout, so that a
// dead cluster answers the API quickly instead of hanging it. It is the
// Kubernetes adapter behind the space-discovery routes.
package kubens

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"spaces/shared/kubecred"
	"spaces/shared/space"
)

// DefaultTimeout bounds one cluster call (mint excluded).
const DefaultTimeout = 5 * time.Second

// Spaces returns one of an org's live spaces (space.Service.Get).
type Spaces interface {
	Get(ctx context.Context, org, id string) (space.Space, error)
}

// Service lists and creates namespaces. The zero Timeout means
// DefaultTimeout. A direct space's cluster is called with credentials from
// Minter (nil: no cloud is reachable, 503); an agent space's API server is
// never called from here: its agent serves the namespaces (Agent, see
// space/agentwork.go).
type Service struct {
	Spaces  Spaces
	Minter  kubecred.Minter
	Agent   space.AgentWorkStore
	Now     func() time.Time
	Timeout time.Duration
}

// Created is a create's answer (space.NamespaceCreated).
type Created = space.NamespaceCreated

// Namespace and NewNamespace are the domain's (the catalog API names them
// without linking this package).
type (
	Namespace    = space.Namespace
	NewNamespace = space.NewNamespace
)

// Validate reports every bad field of n at once: a DNS-1123 label name
// that is not reserved (space.ReservedNamespace: kube-*, default, the
// agent's), valid Kubernetes label keys and values (as many as Kubernetes
// takes), and no Pod Security label below baseline
// (space.CheckNamespaceLabels). The namespace is created with
// space.NamespaceLabels: enforcing baseline unless the labels say more.
func Validate(n NewNamespace) error {
	var fe []space.FieldError
	if n.Name == "" {
		fe = append(fe, space.FieldError{Field: "name", Reason: "is required"})
	} else if errs := validation.IsDNS1123Label(n.Name); len(errs) > 0 {
		fe = append(fe, space.FieldError{Field: "name", Reason: "must be a DNS-1123 label: " + errs[0]})
	} else if why := space.ReservedNamespace(n.Name); why != "" {
		fe = append(fe, space.FieldError{Field: "name", Reason: why})
	}
	// The one label rule, shared with spaces' labels; TestLabelRuleIsKubernetes
	// holds it to k8s.io/apimachinery's.
	space.CheckLabels(&fe, "labels", n.Labels)
	space.CheckNamespaceLabels(&fe, "labels", n.Labels)
	if len(fe) == 0 {
		return nil
	}
	return &space.Error{Kind: space.KindInvalid, Message: "the namespace is not valid", Fields: fe}
}

func (s *Service) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultTimeout
}

// List returns the namespaces of the space's cluster, by name: read from
// a direct space's cluster, or as an agent space's agent last reported
// them (and the list is asked for afresh on its next renewal).
func (s *Service) List(ctx context.Context, org, spaceID string) (space.NamespaceList, error) {
	sp, err := s.space(ctx, org, spaceID)
	if err != nil {
		return space.NamespaceList{}, err
	}
	if sp.Connectivity == space.ViaAgent {
		if err := s.Agent.WantNamespaces(ctx, org, spaceID, s.now()); err != nil {
			return space.NamespaceList{}, err
		}
		return s.Agent.ReportedNamespaces(ctx, org, spaceID)
	}
	var out []Namespace
	err = s.do(ctx, sp, func(ctx context.Context, cs kubernetes.Interface) error {
		list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		out = make([]Namespace, 0, len(list.Items))
		for _, ns := range list.Items {
			out = append(out, view(ns))
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if out == nil {
		out = []Namespace{}
	}
	return space.NamespaceList{Items: out}, err
}

// Create creates a namespace on the space's cluster; KindConflict if it
// exists. For an agent space it records the create for the agent, after
// the same validation; a duplicate (the name is in the agent's last list,
// or a create of it is pending) is KindConflict as well, like a direct
// space's existing namespace.
func (s *Service) Create(ctx context.Context, org, spaceID string, in NewNamespace) (Created, error) {
	if err := Validate(in); err != nil {
		return Created{}, err
	}
	sp, err := s.space(ctx, org, spaceID)
	if err != nil {
		return Created{}, err
	}
	if sp.Connectivity == space.ViaAgent {
		return s.createViaAgent(ctx, org, spaceID, in)
	}
	var out Namespace
	err = s.do(ctx, sp, func(ctx context.Context, cs kubernetes.Interface) error {
		ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: in.Name, Labels: space.NamespaceLabels(in.Labels)},
		}, metav1.CreateOptions{FieldManager: "spaces"})
		if err != nil {
			return err
		}
		out = view(*ns)
		return nil
	})
	return Created{Namespace: out}, err
}

func (s *Service) createViaAgent(ctx context.Context, org, spaceID string, in NewNamespace) (Created, error) {
	list, err := s.Agent.ReportedNamespaces(ctx, org, spaceID)
	if err != nil {
		return Created{}, err
	}
	// A namespace the agent reported is refused by the store's write,
	// which holds only while the list is the one it read (a check here,
	// on this read, would race the agent's report).
	if len(list.Pending) >= space.MaxPendingNamespaceCreates {
		return Created{}, space.Errorf(space.KindConflict, "%d namespace creates are already waiting for the agent; retry once it has carried them out", len(list.Pending))
	}
	c := space.NamespaceCreate{Name: in.Name, Labels: space.NamespaceLabels(in.Labels)}
	if err := s.Agent.RequestNamespace(ctx, org, spaceID, c); err != nil {
		return Created{}, err
	}
	return Created{Pending: &c}, nil
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func view(ns corev1.Namespace) Namespace {
	labels := ns.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	return Namespace{Name: ns.Name, Phase: string(ns.Status.Phase), Labels: labels, CreatedAt: ns.CreationTimestamp.UTC()}
}

// space finds one of org's live spaces whose namespaces can be served:
// not synthetic; an agent space only where agent work is served.
func (s *Service) space(ctx context.Context, org, spaceID string) (space.Space, error) {
	sp, err := s.Spaces.Get(ctx, org, spaceID)
	if err != nil {
		return sp, err
	}
	switch {
	case sp.Synthetic:
		return sp, &space.Error{Kind: space.KindInvalid, Reason: space.ReasonCredentialsUnavailable,
			Message: "the space is synthetic: it is not a real cluster and has no namespaces"}
	case sp.Connectivity == space.ViaAgent && s.Agent == nil:
		return sp, space.Errorf(space.KindUnavailable, "namespaces through agents are not served here")
	case sp.Connectivity != space.ViaAgent && s.Minter == nil:
		return sp, space.Errorf(space.KindUnavailable, "cluster discovery is not configured")
	}
	return sp, nil
}

// do mints credentials for a direct space and runs call against its
// cluster. A 401 means the credential went stale: it is dropped, minted
// afresh and the call is tried once more.
func (s *Service) do(ctx context.Context, sp space.Space, call func(context.Context, kubernetes.Interface) error) error {
	for attempt := 1; ; attempt++ {
		creds, err := s.Minter.Mint(ctx, sp)
		if err != nil {
			return err
		}
		cs, err := client(creds, s.timeout())
		if err != nil {
			return &space.Error{Kind: space.KindBadGateway, Reason: space.ReasonCredentialsUnavailable,
				Message: "the minted credentials are not usable", Err: err}
		}
		cctx, cancel := context.WithTimeout(ctx, s.timeout())
		err = call(cctx, cs)
		cancel()
		if err == nil {
			return nil
		}
		if apierrors.IsUnauthorized(err) && attempt == 1 {
			s.Minter.Invalidate(sp.ID)
			continue
		}
		return classify(err)
	}
}

func client(c kubecred.Credentials, timeout time.Duration) (kubernetes.Interface, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(&rest.Config{
		Host:            c.Server,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData},
		Timeout:         timeout,
		UserAgent:       "spaces-discovery",
		// JSON rather than protobuf: every API server and proxy speaks it.
		ContentConfig: rest.ContentConfig{ContentType: "application/json"},
		QPS:           -1, // one or two calls per request: no client-side rate limit
	})
}

// classify maps a cluster call's failure to an API answer.
func classify(err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		code := int(st.Status().Code)
		switch {
		case apierrors.IsAlreadyExists(err):
			return &space.Error{Kind: space.KindConflict, Message: "the namespace already exists"}
		case apierrors.IsInvalid(err):
			return &space.Error{Kind: space.KindInvalid, Message: "the cluster refused the namespace: " + st.Status().Message}
		case code == http.StatusUnauthorized:
			return &space.Error{Kind: space.KindBadGateway, Reason: space.ReasonUnauthorized,
				Message: "the cluster rejected the minted credentials (401)", Err: err}
		case code == http.StatusForbidden:
			return &space.Error{Kind: space.KindBadGateway, Reason: space.ReasonUnauthorized,
				Message: "the cluster forbids this to Spaces' identity (403)", Err: err}
		}
		return &space.Error{Kind: space.KindBadGateway, Reason: space.ReasonBadResponse,
			Message: fmt.Sprintf("the cluster answered %d %s", code, http.StatusText(code)), Err: err}
	}
	reason, msg := space.ReasonUnreachable, "the cluster cannot be reached"
	if errors.Is(err, context.DeadlineExceeded) {
		reason, msg = space.ReasonTimeout, "the cluster did not answer in time"
	}
	return &space.Error{Kind: space.KindUnavailable, Reason: reason, Message: msg, Err: err}
}
