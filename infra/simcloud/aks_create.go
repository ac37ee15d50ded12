package simcloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"spaces/shared/space"
)

// armCreate is managedClusters createOrUpdate (PUT). Repeating the PUT of a
// creation (same spaces-provisioning-job tag) answers the cluster as it
// stands; the simulated cloud does not update clusters, so any other PUT
// on a taken name is a conflict rather than a silent change.
func (c *Cloud) armCreate(w http.ResponseWriter, r *http.Request) {
	principal, ok := c.armCaller(w, r, "managedClusters.createOrUpdate")
	if !ok {
		return
	}
	sub, rg, name := r.PathValue("sub"), r.PathValue("rg"), r.PathValue("name")
	var in struct {
		Location   string            `json:"location"`
		Tags       map[string]string `json:"tags"`
		Properties struct {
			KubernetesVersion string `json:"kubernetesVersion"`
			AgentPoolProfiles []struct {
				Name         string `json:"name"`
				Count        int    `json:"count"`
				MinCount     int    `json:"minCount"`
				MaxCount     int    `json:"maxCount"`
				VMSize       string `json:"vmSize"`
				VnetSubnetID string `json:"vnetSubnetID"`
			} `json:"agentPoolProfiles"`
		} `json:"properties"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		armError(w, http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized.")
		return
	}
	cl := &Cluster{Provider: space.Azure, Name: name, Account: sub, ResourceGroup: rg, Location: in.Location}
	if !c.mayCreate(sub, principal) {
		armError(w, http.StatusForbidden, "AuthorizationFailed", fmt.Sprintf(
			"The client '%s' does not have authorization to perform action 'Microsoft.ContainerService/managedClusters/write' over scope '%s' or the scope is invalid.",
			principal, aksID(cl)))
		return
	}
	if code, msg := c.aksRefusal(sub, in.Location, name, in.Properties.KubernetesVersion); code != "" {
		armError(w, http.StatusBadRequest, code, msg)
		return
	}
	if len(in.Properties.AgentPoolProfiles) != 1 {
		armError(w, http.StatusBadRequest, "InvalidParameter", "Exactly one agent pool is supported here (simulated AKS).")
		return
	}
	p := in.Properties.AgentPoolProfiles[0]
	if code, msg := c.aksPoolRefusal(sub, in.Location, p.Name, p.VMSize, p.VnetSubnetID, p.MinCount, p.MaxCount, p.Count); code != "" {
		armError(w, http.StatusBadRequest, code, msg)
		return
	}
	job := in.Tags["spaces-provisioning-job"]
	got, made, err := c.create(*cl, &creation{creator: principal, version: in.Properties.KubernetesVersion, tags: in.Tags,
		maxNodes: p.MaxCount, token: job})
	var qe *quotaError
	switch {
	case errors.Is(err, errNoBackend):
		armError(w, http.StatusServiceUnavailable, "ServiceUnavailable", err.Error())
		return
	case errors.As(err, &qe):
		armError(w, http.StatusBadRequest, "QuotaExceeded", fmt.Sprintf(
			"Operation could not be completed as it results in exceeding approved Nodes quota. Location: %s, Current Limit: %d, Current Usage: %d, Additional Required: %d.",
			in.Location, qe.quota, qe.inUse, qe.asked))
		return
	case !made && (job == "" || got.made == nil || got.made.token != job):
		armError(w, http.StatusConflict, "OperationNotAllowed", "The managed cluster "+name+" already exists in resource group "+rg+
			"; the simulated cloud does not update managed clusters.")
		return
	case made:
		c.recorded(got)
		writeJSON(w, http.StatusCreated, c.aksCluster(got))
		return
	}
	writeJSON(w, http.StatusOK, c.aksCluster(got))
}

// aksRefusal is ARM's answer to a managed cluster it will not create.
func (c *Cloud) aksRefusal(sub, location, name, version string) (string, string) {
	switch {
	case !aksName.MatchString(name):
		return "InvalidParameter", "The value of parameter resourceName is invalid: " + name + ". It must be 1 to 63 letters, digits, '-' or '_', starting and ending with a letter or digit."
	case location == "":
		return "LocationRequired", "The location property is required for this definition."
	case !supportedVersion(space.Azure, version, true):
		return "K8sVersionNotSupported", "Version " + version + " is not supported in this region. Please use [az aks get-versions] command to get the supported version list in this region. Supported: " + joinVersions(space.Azure) + "."
	}
	return "", ""
}

func (c *Cloud) aksPoolRefusal(sub, location, pool, size, subnet string, min, max, count int) (string, string) {
	if !knownMachine(space.Azure, size) {
		return "InvalidParameter", "The VM size of " + size + " is not allowed in your subscription in location '" + location +
			"'. The available VM sizes are " + strings.Join(MachineTypes[space.Azure], ",") + "."
	}
	if msg := poolSizes(min, max, count); msg != "" {
		return "InvalidParameter", "Agent pool " + pool + ": " + msg + "."
	}
	if subnet != "" {
		if _, ok := c.network(space.Azure, sub, subnet); !ok {
			return "InvalidVnetSubnetID", "The subnet '" + subnet + "' was not found: the VNet subnet must exist in subscription " + sub + "."
		}
	}
	return "", ""
}
