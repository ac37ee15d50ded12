package simcloud

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"spaces/shared/space"
)

// runtimePrincipal is the Google identity of the runtime itself.
const runtimePrincipal = "runtime:" + GoogleClientID

// googleToken is an OAuth2 token endpoint for the runtime's own identity
// (client credentials, client_secret_basic or _post).
func (c *Cloud) googleToken(w http.ResponseWriter, r *http.Request) {
	if fail := c.count("google:token"); fail != 0 {
		googleError(w, fail, "UNAVAILABLE", "simulated failure")
		return
	}
	_ = r.ParseForm()
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if r.PostForm.Get("grant_type") != "client_credentials" || id != GoogleClientID || secret != GoogleClientSecret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": "The OAuth client was not found."})
		return
	}
	tok, exp := c.issue(runtimePrincipal, "runtime", "")
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer",
		"expires_in": int(time.Until(exp).Seconds())})
}

// generateAccessToken is IAM Credentials' projects.serviceAccounts.
// generateAccessToken: the runtime impersonates a service account.
func (c *Cloud) generateAccessToken(w http.ResponseWriter, r *http.Request) {
	sa, ok := strings.CutSuffix(r.PathValue("sa"), ":generateAccessToken")
	if !ok {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "unknown method")
		return
	}
	if fail := c.count("iam:generateAccessToken"); fail != 0 {
		googleError(w, fail, "UNAVAILABLE", "simulated failure")
		return
	}
	caller, live := c.lookup(bearer(r))
	if !live || caller.principal != runtimePrincipal {
		googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		return
	}
	var body struct {
		Scope    []string `json:"scope"`
		Lifetime string   `json:"lifetime"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil || len(body.Scope) == 0 {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "scope is required")
		return
	}
	c.mu.Lock()
	allowed := c.sas[sa]
	c.mu.Unlock()
	if !allowed {
		googleError(w, http.StatusForbidden, "PERMISSION_DENIED",
			"Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).")
		return
	}
	tok, exp := c.issue(sa, strings.Join(body.Scope, " "), space.GCP)
	writeJSON(w, http.StatusOK, map[string]string{"accessToken": tok, "expireTime": exp.Format(time.RFC3339)})
}

// gkeCaller authenticates a container API call: a service account token.
func (c *Cloud) gkeCaller(w http.ResponseWriter, r *http.Request, op string) (string, bool) {
	if fail := c.count("gke:" + op); fail != 0 {
		googleError(w, fail, "UNAVAILABLE", "simulated failure")
		return "", false
	}
	is, ok := c.lookup(bearer(r))
	if !ok || is.principal == runtimePrincipal {
		googleError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		return "", false
	}
	return is.principal, true
}

func (c *Cloud) gkeGet(w http.ResponseWriter, r *http.Request) {
	sa, ok := c.gkeCaller(w, r, "GetCluster")
	if !ok {
		return
	}
	project, loc, name := r.PathValue("project"), r.PathValue("location"), r.PathValue("name")
	cl := c.findCluster(func(cl *Cluster) bool {
		return cl.Provider == space.GCP && cl.Account == project && cl.Location == loc && cl.Name == name
	})
	if cl == nil {
		googleError(w, http.StatusNotFound, "NOT_FOUND",
			"Not found: projects/"+project+"/locations/"+loc+"/clusters/"+name+".")
		return
	}
	if !cl.grants(sa) {
		googleError(w, http.StatusForbidden, "PERMISSION_DENIED",
			"Required \"container.clusters.get\" permission(s) for \"projects/"+project+"/locations/"+loc+"/clusters/"+name+"\".")
		return
	}
	writeJSON(w, http.StatusOK, gkeCluster(cl))
}

func gkeCluster(cl *Cluster) map[string]any {
	return map[string]any{
		"name": cl.Name, "location": cl.Location, "status": "RUNNING",
		// GKE reports a bare address; Server is a URL.
		"endpoint":   strings.TrimPrefix(cl.Server, "https://"),
		"masterAuth": map[string]string{"clusterCaCertificate": base64.StdEncoding.EncodeToString(cl.CAPEM)},
		"selfLink":   "https://container.googleapis.com/v1/projects/" + cl.Account + "/locations/" + cl.Location + "/clusters/" + cl.Name,
	}
}

func (c *Cloud) gkeList(w http.ResponseWriter, r *http.Request) {
	sa, ok := c.gkeCaller(w, r, "ListClusters")
	if !ok {
		return
	}
	project, loc := r.PathValue("project"), r.PathValue("location")
	out := []map[string]any{}
	for _, cl := range c.listClusters(func(cl *Cluster) bool {
		return cl.Provider == space.GCP && cl.Account == project && (loc == "-" || cl.Location == loc) && cl.grants(sa)
	}) {
		out = append(out, gkeCluster(&cl))
	}
	writeJSON(w, http.StatusOK, map[string]any{"clusters": out})
}

func googleError(w http.ResponseWriter, code int, status, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}
