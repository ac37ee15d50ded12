package simcloud

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"spaces/shared/space"
)

// EKSTokenPrefix starts every EKS bearer token.
const EKSTokenPrefix = "k8s-aws-v1."

// tokenReview answers a kube-apiserver's authentication.k8s.io/v1
// TokenReview for the clusters backed by it.
func (c *Cloud) tokenReview(w http.ResponseWriter, r *http.Request) {
	c.count("webhook:tokenreview")
	var review struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Token string `json:"token"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&review); err != nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	user, groups, err := c.authenticate(r.Context(), r.PathValue("backend"), review.Spec.Token)
	status := map[string]any{"authenticated": err == nil}
	if err == nil {
		status["user"] = map[string]any{"username": user, "uid": user, "groups": groups}
	} else {
		status["error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status})
}

// authenticate maps a bearer token to the principal it stands for, if that
// principal may use a cluster behind backend. Authorized principals are
// cluster admins (an EKS access entry with the cluster admin policy, GKE's
// roles/container.admin, AKS's Cluster Admin role).
func (c *Cloud) authenticate(ctx context.Context, backend, token string) (string, []string, error) {
	var principal string
	var provider space.Provider
	var clusterName string
	if enc, ok := strings.CutPrefix(token, EKSTokenPrefix); ok {
		arn, cluster, err := c.verifyEKSToken(ctx, backend, enc)
		if err != nil {
			return "", nil, err
		}
		principal, provider, clusterName = arn, space.AWS, cluster
	} else {
		is, ok := c.lookup(token)
		if !ok {
			return "", nil, errors.New("unknown or expired token")
		}
		principal = is.principal
		switch {
		case strings.HasPrefix(principal, "azure:"):
			if is.audience != AKSServerAudience {
				return "", nil, errors.New("token audience is not the AKS server")
			}
			provider = space.Azure
		default:
			provider = space.GCP
		}
	}
	cl := c.findCluster(func(cl *Cluster) bool {
		return cl.Backend == backend && cl.Provider == provider && (clusterName == "" || cl.Name == clusterName) &&
			cl.grants(principal) && c.active(cl)
	})
	if cl == nil {
		return "", nil, fmt.Errorf("%s has no access to a cluster here", principal)
	}
	return principal, []string{"system:masters", "system:authenticated"}, nil
}

// verifyEKSToken checks an EKS token the way the EKS authenticator does and
// returns the IAM role and the cluster it was made for.
func (c *Cloud) verifyEKSToken(ctx context.Context, backend, enc string) (string, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", "", errors.New("token is not base64url")
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return "", "", errors.New("token is not a URL")
	}
	self, _ := url.Parse(c.URL)
	q := u.Query()
	switch {
	case u.Scheme != "https" || u.Host != self.Host:
		return "", "", fmt.Errorf("token host %q is not STS", u.Host)
	case u.Path != "/" && u.Path != "":
		return "", "", errors.New("token path is not /")
	case q.Get("Action") != "GetCallerIdentity":
		return "", "", errors.New("token action is not GetCallerIdentity")
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	hasID := false
	for _, h := range signed {
		hasID = hasID || h == "x-k8s-aws-id"
	}
	if !hasID {
		return "", "", errors.New("x-k8s-aws-id is not signed")
	}
	at, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil || c.opts.Now().Sub(at) > presignedLifetime {
		return "", "", errors.New("token expired")
	}
	// Like the authenticator, send the cluster id this API server serves
	// and let STS check the signature over it; a backend may serve more
	// than one simulated EKS cluster, so each is tried.
	for _, cl := range c.listClusters(func(cl *Cluster) bool { return cl.Provider == space.AWS && cl.Backend == backend && c.active(cl) }) {
		arn, err := c.callSTS(ctx, u.String(), cl.Name)
		if errors.Is(err, errSignature) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		return arn, cl.Name, nil
	}
	return "", "", errors.New("token is not for a cluster here (signature does not match)")
}

// callSTS executes the presigned GetCallerIdentity with the cluster id
// header and returns the caller's role ARN.
func (c *Cloud) callSTS(ctx context.Context, presigned, cluster string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, presigned, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("x-k8s-aws-id", cluster)
	resp, err := c.self.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		var e stsErrorResponse
		_ = xml.Unmarshal(body, &e)
		if e.Code == "SignatureDoesNotMatch" {
			return "", errSignature
		}
		return "", fmt.Errorf("STS: %s: %s", e.Code, e.Message)
	}
	var out getCallerIdentityResponse
	if err := xml.Unmarshal(body, &out); err != nil {
		return "", err
	}
	// arn:aws:sts::<acct>:assumed-role/<role>/<session> -> the role ARN.
	parts := strings.Split(out.Result.Arn, "/")
	if len(parts) != 3 || !strings.Contains(parts[0], ":assumed-role") {
		return "", fmt.Errorf("caller %s is not an assumed role", out.Result.Arn)
	}
	return "arn:aws:iam::" + out.Result.Account + ":role/" + parts[1], nil
}
