package testcluster

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/version"
)

// maxBody bounds request bodies; a namespace is a few hundred bytes.
const maxBody = 1 << 20

var namespacesGR = schema.GroupResource{Resource: "namespaces"}

// decoder decodes request bodies in every encoding client-go may send:
// typed clients prefer protobuf for built-in kinds, others send JSON.
// Answers are always JSON, which every client accepts. It is built on first
// use: most clusters in a scale test never see a write.
func (c *Cluster) decoder() apiruntime.Decoder {
	c.decOnce.Do(func() {
		s := apiruntime.NewScheme()
		if err := corev1.AddToScheme(s); err != nil {
			panic(err) // static registration; cannot fail
		}
		c.dec = serializer.NewCodecFactory(s).UniversalDeserializer()
	})
	return c.dec
}

func (c *Cluster) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", c.getVersion)
	mux.HandleFunc("GET /api", c.getAPI)
	mux.HandleFunc("GET /apis", getAPIs)
	mux.HandleFunc("GET /api/v1", getAPIv1)
	mux.HandleFunc("GET /api/v1/namespaces", c.listNamespaces)
	mux.HandleFunc("POST /api/v1/namespaces", c.createNamespace)
	mux.HandleFunc("GET /api/v1/namespaces/{name}", c.getNamespace)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
	})
	return mux
}

func (c *Cluster) getVersion(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	info := version.Info{GitVersion: c.gitVersion, Platform: c.platform}
	c.mu.Unlock()
	if v, err := utilversion.ParseGeneric(info.GitVersion); err == nil {
		info.Major, info.Minor = strconv.Itoa(int(v.Major())), strconv.Itoa(int(v.Minor()))
	}
	info.GitTreeState = "clean"
	info.BuildDate = "2025-01-01T00:00:00Z"
	info.GoVersion = runtime.Version()
	info.Compiler = runtime.Compiler
	writeJSON(w, http.StatusOK, info)
}

func (c *Cluster) getAPI(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
		},
	})
}

func getAPIs(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups:   []metav1.APIGroup{},
	})
}

func getAPIv1(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{
			Name:         "namespaces",
			SingularName: "namespace",
			Kind:         "Namespace",
			Verbs:        metav1.Verbs{"create", "get", "list"},
			ShortNames:   []string{"ns"},
		}},
	})
}

func (c *Cluster) listNamespaces(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
		writeStatus(w, apierrors.NewBadRequest("testcluster does not serve watches"))
		return
	}
	c.mu.Lock()
	list := corev1.NamespaceList{
		TypeMeta: metav1.TypeMeta{Kind: "NamespaceList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(c.rv, 10)},
		Items:    make([]corev1.Namespace, 0, len(c.namespaces)),
	}
	for _, name := range sortedNames(c.namespaces) {
		list.Items = append(list.Items, c.namespaces[name])
	}
	c.mu.Unlock()
	writeJSON(w, http.StatusOK, list)
}

func (c *Cluster) getNamespace(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	c.mu.Lock()
	ns, ok := c.namespaces[name]
	c.mu.Unlock()
	if !ok {
		writeStatus(w, apierrors.NewNotFound(namespacesGR, name))
		return
	}
	writeJSON(w, http.StatusOK, withKind(ns))
}

func (c *Cluster) createNamespace(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeStatus(w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d bytes", maxBody)))
			return
		}
		writeStatus(w, apierrors.NewBadRequest("reading the body: "+err.Error()))
		return
	}
	// A JSON body without apiVersion or kind means a Namespace; any other
	// kind is refused.
	def := corev1.SchemeGroupVersion.WithKind("Namespace")
	obj, _, err := c.decoder().Decode(body, &def, nil)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest("the body is not a Namespace: "+err.Error()))
		return
	}
	in, ok := obj.(*corev1.Namespace)
	if !ok {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("the body is a %T, not a Namespace", obj)))
		return
	}
	name := in.Name
	if name == "" && in.GenerateName != "" {
		name = in.GenerateName + randomSuffix()
	}
	if errs := validateName(name); len(errs) > 0 {
		writeStatus(w, apierrors.NewInvalid(def.GroupKind(), name, errs))
		return
	}

	c.mu.Lock()
	if _, exists := c.namespaces[name]; exists {
		c.mu.Unlock()
		writeStatus(w, apierrors.NewAlreadyExists(namespacesGR, name))
		return
	}
	ns := c.newNamespaceLocked(name, time.Now())
	ns.Labels = mergeLabels(in.Labels, ns.Labels)
	ns.Annotations = in.Annotations
	ns.GenerateName = in.GenerateName
	c.namespaces[name] = ns
	c.mu.Unlock()
	writeJSON(w, http.StatusCreated, withKind(ns))
}

func validateName(name string) field.ErrorList {
	p := field.NewPath("metadata", "name")
	if name == "" {
		return field.ErrorList{field.Required(p, "name or generateName is required")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// newNamespaceLocked builds a stored namespace the way the API server
// fills it in. c.mu must be held.
func (c *Cluster) newNamespaceLocked(name string, now time.Time) corev1.Namespace {
	c.rv++
	return corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			UID:               types.UID(newUID()),
			ResourceVersion:   strconv.FormatInt(c.rv, 10),
			CreationTimestamp: metav1.NewTime(now.Truncate(time.Second)),
			Labels:            map[string]string{corev1.LabelMetadataName: name},
		},
		Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
}

func withKind(ns corev1.Namespace) corev1.Namespace {
	ns.TypeMeta = metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}
	return ns
}

func mergeLabels(in, server map[string]string) map[string]string {
	out := make(map[string]string, len(in)+len(server))
	for k, v := range in {
		out[k] = v
	}
	for k, v := range server {
		out[k] = v
	}
	return out
}

func sortedNames(m map[string]corev1.Namespace) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (c *Cluster) writeUnauthorized(w http.ResponseWriter) {
	c.mu.Lock()
	c.served401++
	c.mu.Unlock()
	writeStatus(w, apierrors.NewUnauthorized("Unauthorized"))
}

func writeForbidden(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: fmt.Sprintf("forbidden: User %q cannot %s path %q", "system:anonymous", strings.ToLower(r.Method), path),
	}})
}

func internalError() *apierrors.StatusError {
	return apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
}

func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.ErrStatus
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, int(st.Code), st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	w.Write(b)
}

func newUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func randomSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
