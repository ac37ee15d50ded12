package simcloud

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"spaces/shared/space"
)

// entraDiscovery is the tenant's OpenID configuration, which MSAL reads to
// find the token endpoint of a custom authority.
func (c *Cloud) entraDiscovery(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	base := c.URL + "/" + tenant
	writeJSON(w, http.StatusOK, map[string]any{
		"token_endpoint":                        base + "/oauth2/v2.0/token",
		"authorization_endpoint":                base + "/oauth2/v2.0/authorize",
		"issuer":                                base + "/v2.0",
		"jwks_uri":                              base + "/discovery/v2.0/keys",
		"response_types_supported":              []string{"code", "id_token", "token"},
		"subject_types_supported":               []string{"pairwise"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	})
}

// entraToken serves the client credentials grant with a federated client
// assertion (workload identity federation).
func (c *Cloud) entraToken(w http.ResponseWriter, r *http.Request) {
	if fail := c.count("entra:token"); fail != 0 {
		entraError(w, fail, "temporarily_unavailable", "simulated failure")
		return
	}
	_ = r.ParseForm()
	tenant, client := r.PathValue("tenant"), r.PostForm.Get("client_id")
	principal := AzurePrincipal(tenant, client)
	c.mu.Lock()
	fics, app := c.apps[principal]
	tok, issued := c.assert[r.PostForm.Get("client_assertion")]
	c.mu.Unlock()
	// Entra matches issuer, subject and audience exactly.
	trusted := issued && c.opts.Now().Before(tok.expires) && slices.Contains(fics, tok.FederatedCredential)
	switch {
	case r.PostForm.Get("grant_type") != "client_credentials" ||
		r.PostForm.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
		entraError(w, http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: the grant type is not supported.")
		return
	case !app:
		entraError(w, http.StatusBadRequest, "unauthorized_client",
			fmt.Sprintf("AADSTS700016: Application with identifier '%s' was not found in the directory '%s'.", client, tenant))
		return
	case !trusted:
		entraError(w, http.StatusBadRequest, "invalid_client",
			"AADSTS70021: No matching federated identity record found for presented assertion.")
		return
	}
	scope := r.PostForm.Get("scope")
	audience := strings.TrimSuffix(strings.Fields(scope + " x")[0], "/.default")
	at, exp := c.issue(principal, audience, space.Azure)
	writeJSON(w, http.StatusOK, map[string]any{"token_type": "Bearer", "access_token": at,
		"expires_in": int(time.Until(exp).Seconds()), "ext_expires_in": int(time.Until(exp).Seconds())})
}

func entraError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": code, "error_description": msg, "error_codes": []int{}})
}

// armCaller authenticates an ARM call: an Entra token for ARM's audience.
func (c *Cloud) armCaller(w http.ResponseWriter, r *http.Request, op string) (string, bool) {
	if fail := c.count("arm:" + op); fail != 0 {
		armError(w, fail, "ServiceUnavailable", "simulated failure")
		return "", false
	}
	is, ok := c.lookup(bearer(r))
	if !ok || is.audience != ARMAudience {
		armError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid.")
		return "", false
	}
	return is.principal, true
}

func (c *Cloud) armCluster(w http.ResponseWriter, r *http.Request, op string) *Cluster {
	principal, ok := c.armCaller(w, r, op)
	if !ok {
		return nil
	}
	sub, rg, name := r.PathValue("sub"), r.PathValue("rg"), r.PathValue("name")
	// Resource ids are case-insensitive.
	cl := c.findCluster(func(cl *Cluster) bool {
		return cl.Provider == space.Azure && strings.EqualFold(cl.Account, sub) &&
			strings.EqualFold(cl.ResourceGroup, rg) && strings.EqualFold(cl.Name, name)
	})
	if cl == nil {
		armError(w, http.StatusNotFound, "ResourceNotFound", fmt.Sprintf(
			"The Resource 'Microsoft.ContainerService/managedClusters/%s' under resource group '%s' was not found.", name, rg))
		return nil
	}
	if !cl.grants(principal) {
		armError(w, http.StatusForbidden, "AuthorizationFailed", fmt.Sprintf(
			"The client '%s' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/read' over scope '%s'.",
			principal, aksID(cl)))
		return nil
	}
	return cl
}

func (c *Cloud) armGet(w http.ResponseWriter, r *http.Request) {
	if cl := c.armCluster(w, r, "managedClusters.get"); cl != nil {
		writeJSON(w, http.StatusOK, c.aksCluster(cl))
	}
}

func (c *Cloud) armUserCredential(w http.ResponseWriter, r *http.Request) {
	cl := c.armCluster(w, r, "managedClusters.listClusterUserCredential")
	if cl == nil {
		return
	}
	if !c.active(cl) {
		armError(w, http.StatusConflict, "OperationNotAllowed", "The managed cluster "+cl.Name+" is still being created.")
		return
	}
	// What AKS returns for an Entra-enabled cluster: the server and its CA,
	// and an exec plugin (kubelogin) for the user, which Spaces ignores.
	kubeconfig, _ := yaml.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": cl.Name,
		"clusters": []any{map[string]any{"name": cl.Name, "cluster": map[string]any{
			"server": cl.Server, "certificate-authority-data": cl.CAPEM}}},
		"contexts": []any{map[string]any{"name": cl.Name, "context": map[string]string{"cluster": cl.Name, "user": "clusterUser"}}},
		"users": []any{map[string]any{"name": "clusterUser", "user": map[string]any{"exec": map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "kubelogin",
			"args": []string{"get-token", "--server-id", AKSServerAudience}}}}},
	})
	writeJSON(w, http.StatusOK, map[string]any{"kubeconfigs": []any{map[string]any{"name": "clusterUser", "value": kubeconfig}}})
}

func (c *Cloud) armList(w http.ResponseWriter, r *http.Request) {
	principal, ok := c.armCaller(w, r, "managedClusters.list")
	if !ok {
		return
	}
	sub := r.PathValue("sub")
	out := []any{}
	for _, cl := range c.listClusters(func(cl *Cluster) bool {
		return cl.Provider == space.Azure && strings.EqualFold(cl.Account, sub) && cl.grants(principal)
	}) {
		out = append(out, c.aksCluster(&cl))
	}
	writeJSON(w, http.StatusOK, map[string]any{"value": out})
}

func aksID(cl *Cluster) string {
	return "/subscriptions/" + cl.Account + "/resourceGroups/" + cl.ResourceGroup +
		"/providers/Microsoft.ContainerService/managedClusters/" + cl.Name
}

func (c *Cloud) aksCluster(cl *Cluster) map[string]any {
	props := map[string]any{
		"provisioningState": "Succeeded", "powerState": map[string]string{"code": "Running"},
		"kubernetesVersion": cl.version(), "fqdn": strings.TrimPrefix(cl.Server, "https://"),
		"aadProfile": map[string]any{"managed": true, "enableAzureRBAC": true},
	}
	out := map[string]any{
		"id": aksID(cl), "name": cl.Name, "type": "Microsoft.ContainerService/ManagedClusters", "location": cl.Location,
		"properties": props,
	}
	if m := cl.made; m != nil {
		out["tags"], props["kubernetesVersion"] = m.tags, m.version
		if !c.active(cl) {
			props["provisioningState"] = "Creating"
			delete(props, "fqdn")
		}
	}
	return out
}

func armError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("x-ms-error-code", code)
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
