package simcloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"spaces/shared/space"
)

// gkeCreate is clusters.create: it answers a CREATE_CLUSTER operation, or
// ALREADY_EXISTS when the name is taken in the location (the cluster name
// is GKE's idempotency).
func (c *Cloud) gkeCreate(w http.ResponseWriter, r *http.Request) {
	sa, ok := c.gkeCaller(w, r, "CreateCluster")
	if !ok {
		return
	}
	project, loc := r.PathValue("project"), r.PathValue("location")
	var in struct {
		Cluster struct {
			Name                  string            `json:"name"`
			InitialClusterVersion string            `json:"initialClusterVersion"`
			Network               string            `json:"network"`
			Subnetwork            string            `json:"subnetwork"`
			ResourceLabels        map[string]string `json:"resourceLabels"`
			NodePools             []struct {
				Name             string `json:"name"`
				InitialNodeCount int    `json:"initialNodeCount"`
				Config           struct {
					MachineType string `json:"machineType"`
				} `json:"config"`
				Autoscaling struct {
					Enabled      bool `json:"enabled"`
					MinNodeCount int  `json:"minNodeCount"`
					MaxNodeCount int  `json:"maxNodeCount"`
				} `json:"autoscaling"`
			} `json:"nodePools"`
		} `json:"cluster"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.")
		return
	}
	if !c.mayCreate(project, sa) {
		googleError(w, http.StatusForbidden, "PERMISSION_DENIED",
			"Required \"container.clusters.create\" permission(s) for \"projects/"+project+"\".")
		return
	}
	in2 := in.Cluster
	if msg := c.gkeRefusal(project, loc, in2.Name, in2.InitialClusterVersion, in2.Network, in2.Subnetwork); msg != "" {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg)
		return
	}
	if len(in2.NodePools) != 1 {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Cluster must have exactly one node pool here (simulated GKE).")
		return
	}
	np := in2.NodePools[0]
	as := np.Autoscaling
	switch {
	case !knownMachine(space.GCP, np.Config.MachineType):
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf(
			"Machine type \"%s\" does not exist in zone \"%s\".", np.Config.MachineType, loc))
		return
	case poolSizes(as.MinNodeCount, as.MaxNodeCount, np.InitialNodeCount) != "":
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Node pool \""+np.Name+"\": "+
			poolSizes(as.MinNodeCount, as.MaxNodeCount, np.InitialNodeCount)+".")
		return
	}
	op := "operation-" + strconv.FormatInt(c.opts.Now().UnixMilli(), 10) + "-" + randomHex(4)
	cl, made, err := c.create(Cluster{Provider: space.GCP, Name: in2.Name, Account: project, Location: loc},
		&creation{creator: sa, version: in2.InitialClusterVersion, tags: in2.ResourceLabels, op: op, maxNodes: as.MaxNodeCount})
	var qe *quotaError
	switch {
	case errors.Is(err, errNoBackend):
		googleError(w, http.StatusServiceUnavailable, "UNAVAILABLE", err.Error())
		return
	case errors.As(err, &qe):
		googleError(w, http.StatusForbidden, "RESOURCE_EXHAUSTED", fmt.Sprintf(
			"Insufficient regional quota to satisfy request: resource \"NODES\": request requires '%d.0' and is short '%d.0'. project has a quota of '%d.0' with '%d.0' available.",
			qe.asked, qe.inUse+qe.asked-qe.quota, qe.quota, qe.quota-qe.inUse))
		return
	case !made:
		googleError(w, http.StatusConflict, "ALREADY_EXISTS",
			"Already exists: projects/"+project+"/locations/"+loc+"/clusters/"+in2.Name+".")
		return
	}
	c.recorded(cl)
	writeJSON(w, http.StatusOK, c.gkeOperation(cl))
}

// gkeRefusal is GKE's answer to a cluster it will not create, "" if none.
func (c *Cloud) gkeRefusal(project, loc, name, version, network, subnetwork string) string {
	if !gkeName.MatchString(name) {
		return "Invalid value for field \"cluster.name\": \"" + name + "\". Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?)' (only alphanumerics and '-' allowed, must start with a letter and end with an alphanumeric, and must be no longer than 40 characters)."
	}
	if version != "" && !supportedVersion(space.GCP, version, true) {
		return "Master version \"" + version + "\" is unsupported."
	}
	if network == "" {
		network = "default"
	}
	if _, ok := c.network(space.GCP, project, network); !ok && network != "default" {
		return "Network \"" + network + "\" does not exist."
	}
	if subnetwork != "" {
		if in, ok := c.network(space.GCP, project, subnetwork); !ok || in != network {
			return "Subnetwork \"projects/" + project + "/regions/" + loc + "/subnetworks/" + subnetwork +
				"\" is not valid for Network \"" + network + "\"."
		}
	}
	return ""
}

func (c *Cloud) gkeOperation(cl *Cluster) map[string]any {
	status, end := "RUNNING", ""
	if c.active(cl) {
		status, end = "DONE", cl.made.readyAt.UTC().Format(time.RFC3339Nano)
	}
	base := "https://container.googleapis.com/v1/projects/" + cl.Account + "/locations/" + cl.Location
	return map[string]any{
		"name": cl.made.op, "zone": cl.Location, "location": cl.Location, "operationType": "CREATE_CLUSTER", "status": status,
		"selfLink": base + "/operations/" + cl.made.op, "targetLink": gkeLink(cl), "endTime": end,
	}
}

// gkeOps are the creation operations of project/location the caller may see.
func (c *Cloud) gkeOps(sa, project, loc, op string) []Cluster {
	return c.listClusters(func(cl *Cluster) bool {
		return cl.Provider == space.GCP && cl.made != nil && cl.Account == project && (loc == "-" || cl.Location == loc) &&
			(op == "" || cl.made.op == op) && cl.grants(sa)
	})
}

// gkeGetOperation is operations.get.
func (c *Cloud) gkeGetOperation(w http.ResponseWriter, r *http.Request) {
	sa, ok := c.gkeCaller(w, r, "GetOperation")
	if !ok {
		return
	}
	project, loc, op := r.PathValue("project"), r.PathValue("location"), r.PathValue("op")
	found := c.gkeOps(sa, project, loc, op)
	if len(found) == 0 {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "Not found: projects/"+project+"/locations/"+loc+"/operations/"+op+".")
		return
	}
	writeJSON(w, http.StatusOK, c.gkeOperation(&found[0]))
}

// gkeListOperations is operations.list.
func (c *Cloud) gkeListOperations(w http.ResponseWriter, r *http.Request) {
	sa, ok := c.gkeCaller(w, r, "ListOperations")
	if !ok {
		return
	}
	out := []any{}
	for _, cl := range c.gkeOps(sa, r.PathValue("project"), r.PathValue("location"), "") {
		out = append(out, c.gkeOperation(&cl))
	}
	writeJSON(w, http.StatusOK, map[string]any{"operations": out})
}
