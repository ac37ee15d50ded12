// Package install applies the agent's rendered manifests (agent/manifests)
// to a cluster with client-go's server-side apply, as kubectl apply
// --server-side would, and deletes them again: the one way the spaces CLI
// (spaces agent install), the Terraform provider (spaces_space's
// agent_install) and the demo install the agent. Errors name an object,
// never its content: the bootstrap Secret holds the token.
package install

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"spaces/agent/manifests"
)

// RESTConfig is the client-go config of a kubeconfig's context: kubeconfig
// "" is $KUBECONFIG, else ~/.kube/config, as kubectl reads them; context ""
// is the file's current context.
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %q: %w", context, err)
	}
	return rc, nil
}

// Object names one object of the manifests.
type Object struct {
	Kind, Namespace, Name string
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// cluster resolves the manifests' kinds to resources.
type cluster struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func connect(rc *rest.Config) (*cluster, error) {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &cluster{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))}, nil
}

func (c *cluster) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	if o.GetNamespace() != "" {
		return c.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
	}
	return c.dyn.Resource(m.Resource), nil
}

func nameOf(o *unstructured.Unstructured) Object {
	return Object{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

// Apply applies the rendered manifests in their order (the namespace
// first) with server-side apply under fieldManager, forcing conflicts as
// the installer owns these objects; applying again (a reinstall) updates
// them and leaves what the agent keeps in its state Secret. applied, if
// not nil, is told each object once it is applied.
func Apply(ctx context.Context, rc *rest.Config, rendered []byte, fieldManager string, applied func(Object)) error {
	objs, err := manifests.Objects(rendered)
	if err != nil {
		return err
	}
	c, err := connect(rc)
	if err != nil {
		return err
	}
	for _, o := range objs {
		ri, err := c.resource(o)
		if err != nil {
			return err
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("apply %s: %s", nameOf(o), Reason(err))
		}
		if applied != nil {
			applied(nameOf(o))
		}
	}
	return nil
}

// Delete deletes the rendered manifests' objects in the reverse order of
// their apply (the Deployment first, the namespace last), each one
// explicitly, so that nothing is left to a controller but the namespace's
// own finalization; an object already gone is no error. deleted, if not
// nil, is told each object deleted.
func Delete(ctx context.Context, rc *rest.Config, rendered []byte, deleted func(Object)) error {
	objs, err := manifests.Objects(rendered)
	if err != nil {
		return err
	}
	c, err := connect(rc)
	if err != nil {
		return err
	}
	for _, o := range slices.Backward(objs) {
		ri, err := c.resource(o)
		if err != nil {
			return err
		}
		switch err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("delete %s: %s", nameOf(o), Reason(err))
		case deleted != nil:
			deleted(nameOf(o))
		}
	}
	return nil
}

// Reason is an API server's refusal without the object it may echo.
func Reason(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return fmt.Sprintf("%s (%d)", st.Reason, st.Code)
	}
	return err.Error()
}
