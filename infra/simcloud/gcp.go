package simcloud

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"spaces/shared/space"
)

// federatedPrefix starts every principal of a workload identity pool.
const federatedPrefix = "principal://iam.googleapis.com/"

// googleExchange is Google STS's token exchange for an AWS workload
// identity pool provider: the subject token is a GetCallerIdentity request
// signed with the caller's AWS credentials, which simcloud's STS verifies;
// the pool's mapping google.subject=assertion.arn names the principal
// after the caller's ARN, role session name included.
func (c *Cloud) googleExchange(w http.ResponseWriter, r *http.Request) {
	if fail := c.count("google:sts"); fail != 0 {
		googleError(w, fail, "UNAVAILABLE", "simulated failure")
		return
	}
	_ = r.ParseForm()
	f := r.PostForm
	audience := "//iam.googleapis.com/" + GCPWorkloadIdentityProvider
	if f.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" ||
		f.Get("subject_token_type") != "urn:ietf:params:aws:token-type:aws4_request" || f.Get("audience") != audience {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": "unsupported exchange"})
		return
	}
	raw, err := url.QueryUnescape(f.Get("subject_token"))
	var st struct {
		URL     string `json:"url"`
		Method  string `json:"method"`
		Headers []struct{ Key, Value string }
	}
	if err == nil {
		err = json.Unmarshal([]byte(raw), &st)
	}
	u, uerr := url.Parse(st.URL)
	if err != nil || uerr != nil || !strings.HasPrefix(u.Host, "sts.") || u.Query().Get("Action") != "GetCallerIdentity" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "the subject token is not a signed GetCallerIdentity request"})
		return
	}
	req, _ := http.NewRequest(st.Method, st.URL, nil)
	req.Host = u.Host
	for _, h := range st.Headers {
		if !strings.EqualFold(h.Key, "host") {
			req.Header.Add(h.Key, h.Value)
		}
	}
	caller, err := c.verifyHeaderSigned(req, nil)
	if err != nil || caller.session == nil || req.Header.Get("x-goog-cloud-target-resource") != audience {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant", "error_description": "The AWS request signature is invalid or not for this provider"})
		return
	}
	s := caller.session
	arn := "arn:aws:sts::" + accountOf(s.roleARN) + ":assumed-role/" + s.roleARN[strings.LastIndex(s.roleARN, "/")+1:] + "/" + s.sessionName
	pool, _, _ := strings.Cut(GCPWorkloadIdentityProvider, "/providers/")
	tok, exp := c.issue(federatedPrefix+pool+"/subject/"+arn, "federated", "")
	writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer",
		"issued_token_type": "urn:ietf:params:oauth:token-type:access_token", "expires_in": int(time.Until(exp).Seconds())})
}

// grantsImpersonation reports whether the service account lets principal
// impersonate it: named, or through a principalSet of its pool.
func grantsImpersonation(granted []string, principal string) bool {
	for _, g := range granted {
		if g == principal {
			return true
		}
		if set, ok := strings.CutSuffix(g, "/*"); ok && strings.HasPrefix(set, "principalSet://") &&
			strings.HasPrefix(principal, federatedPrefix+strings.TrimPrefix(set, "principalSet://iam.googleapis.com/")+"/subject/") {
			return true
		}
	}
	return false
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
	if !live || !strings.HasPrefix(caller.principal, federatedPrefix) {
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
	allowed := grantsImpersonation(c.sas[sa], caller.principal)
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
	if !ok || strings.HasPrefix(is.principal, federatedPrefix) {
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
	writeJSON(w, http.StatusOK, c.gkeCluster(cl))
}

func (c *Cloud) gkeCluster(cl *Cluster) map[string]any {
	out := map[string]any{
		"name": cl.Name, "location": cl.Location, "status": "RUNNING", "currentMasterVersion": cl.version(),
		// GKE reports a bare address; Server is a URL.
		"endpoint":   strings.TrimPrefix(cl.Server, "https://"),
		"masterAuth": map[string]string{"clusterCaCertificate": base64.StdEncoding.EncodeToString(cl.CAPEM)},
		"selfLink":   gkeLink(cl),
	}
	if m := cl.made; m != nil {
		out["resourceLabels"], out["currentMasterVersion"] = m.tags, m.version
		if !c.active(cl) {
			out["status"] = "PROVISIONING"
			delete(out, "endpoint")
			delete(out, "masterAuth")
		}
	}
	return out
}

func gkeLink(cl *Cluster) string {
	return "https://container.googleapis.com/v1/projects/" + cl.Account + "/locations/" + cl.Location + "/clusters/" + cl.Name
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
		out = append(out, c.gkeCluster(&cl))
	}
	writeJSON(w, http.StatusOK, map[string]any{"clusters": out})
}

func googleError(w http.ResponseWriter, code int, status, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "status": status}})
}
