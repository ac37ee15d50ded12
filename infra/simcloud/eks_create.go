package simcloud

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"spaces/shared/space"
)

// eksCreate is eks:CreateCluster. A request with the client request token
// of the cluster already holding the name answers that cluster (EKS's
// idempotency); any other request for a taken name is ResourceInUse.
func (c *Cloud) eksCreate(w http.ResponseWriter, r *http.Request) {
	caller, body, ok := c.eksCaller(w, r, "CreateCluster")
	if !ok {
		return
	}
	var in struct {
		Name               string            `json:"name"`
		Version            string            `json:"version"`
		RoleArn            string            `json:"roleArn"`
		ClientRequestToken string            `json:"clientRequestToken"`
		Tags               map[string]string `json:"tags"`
		ResourcesVpcConfig struct {
			SubnetIDs        []string `json:"subnetIds"`
			SecurityGroupIDs []string `json:"securityGroupIds"`
		} `json:"resourcesVpcConfig"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		eksError(w, http.StatusBadRequest, "InvalidParameterException", "the request body is not valid JSON")
		return
	}
	role, acct := caller.roleARN(), accountOf(caller.roleARN())
	cl := &Cluster{Provider: space.AWS, Name: in.Name, Account: acct, Location: caller.region}
	if !c.mayCreate(acct, role) {
		eksError(w, http.StatusForbidden, "AccessDeniedException", fmt.Sprintf(
			"User: %s is not authorized to perform: eks:CreateCluster on resource: %s", role, eksARN(cl)))
		return
	}
	if msg := c.eksRefusal(acct, in.Name, in.Version, in.RoleArn, in.ResourcesVpcConfig.SubnetIDs, in.ResourcesVpcConfig.SecurityGroupIDs); msg != "" {
		eksError(w, http.StatusBadRequest, "InvalidParameterException", msg)
		return
	}
	got, made, err := c.create(*cl, &creation{token: in.ClientRequestToken, creator: role, version: in.Version,
		tags: in.Tags, subnets: in.ResourcesVpcConfig.SubnetIDs})
	switch {
	case errors.Is(err, errNoBackend):
		eksError(w, http.StatusServiceUnavailable, "ServiceUnavailableException", err.Error())
		return
	case !made && (in.ClientRequestToken == "" || got.made == nil || got.made.token != in.ClientRequestToken):
		eksError(w, http.StatusConflict, "ResourceInUseException", "Cluster already exists with name: "+in.Name)
		return
	}
	if made {
		c.recorded(got)
	}
	writeJSON(w, http.StatusOK, map[string]any{"cluster": c.eksCluster(got)})
}

// eksRefusal is EKS's answer to a cluster it will not create, "" if none.
func (c *Cloud) eksRefusal(acct, name, version, roleARN string, subnets, groups []string) string {
	if !eksName.MatchString(name) {
		return "The cluster name " + name + " is not valid: it must start with a letter or digit and contain only letters, digits, hyphens and underscores (at most 100)."
	}
	if !supportedVersion(space.AWS, version, false) {
		return "unsupported Kubernetes version " + version + ". Supported versions: " + joinVersions(space.AWS) + "."
	}
	if msg := roleRefusal(acct, roleARN); msg != "" {
		return msg
	}
	if msg := c.subnetRefusal(acct, subnets); msg != "" {
		return msg
	}
	for _, g := range groups {
		if _, ok := c.network(space.AWS, acct, g); !ok {
			return "The security group '" + g + "' does not exist"
		}
	}
	return ""
}

// roleRefusal checks a role EKS is told to act as: it must be a role of the
// caller's account (which then passes it).
func roleRefusal(acct, roleARN string) string {
	if !strings.HasPrefix(roleARN, "arn:aws:iam::"+acct+":role/") {
		return "Role with arn: " + roleARN + ", could not be assumed because it does not exist or the trusted entity is not correct"
	}
	return ""
}

// subnetRefusal checks subnets as EKS does: each exists, in at least two
// availability zones.
func (c *Cloud) subnetRefusal(acct string, subnets []string) string {
	zones := map[string]bool{}
	for _, s := range subnets {
		az, ok := c.network(space.AWS, acct, s)
		if !ok || az == "" {
			return "The subnet ID '" + s + "' does not exist (Service: AmazonEC2; Status Code: 400; Error Code: InvalidSubnetID.NotFound)"
		}
		zones[az] = true
	}
	if len(zones) < 2 {
		return "Subnets specified must be in at least two different AZs"
	}
	return ""
}

// eksOwnCluster finds the caller's created cluster called name, or answers
// the error.
func (c *Cloud) eksOwnCluster(w http.ResponseWriter, caller awsCaller, name string) *Cluster {
	acct := accountOf(caller.roleARN())
	cl := c.findCluster(func(cl *Cluster) bool {
		return cl.Provider == space.AWS && cl.Name == name && cl.Location == caller.region && cl.Account == acct
	})
	if cl == nil {
		eksError(w, http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+name+".")
		return nil
	}
	if !cl.grants(caller.roleARN()) {
		eksError(w, http.StatusForbidden, "AccessDeniedException", fmt.Sprintf(
			"User: %s is not authorized to perform: eks:CreateNodegroup on resource: %s", caller.roleARN(), eksARN(cl)))
		return nil
	}
	return cl
}

// eksCreateNodegroup is eks:CreateNodegroup, idempotent by client request
// token like CreateCluster; the node group counts against the node quota.
func (c *Cloud) eksCreateNodegroup(w http.ResponseWriter, r *http.Request) {
	caller, body, ok := c.eksCaller(w, r, "CreateNodegroup")
	if !ok {
		return
	}
	var in struct {
		NodegroupName      string            `json:"nodegroupName"`
		NodeRole           string            `json:"nodeRole"`
		Subnets            []string          `json:"subnets"`
		InstanceTypes      []string          `json:"instanceTypes"`
		ClientRequestToken string            `json:"clientRequestToken"`
		Tags               map[string]string `json:"tags"`
		ScalingConfig      struct {
			MinSize, MaxSize, DesiredSize int
		} `json:"scalingConfig"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		eksError(w, http.StatusBadRequest, "InvalidParameterException", "the request body is not valid JSON")
		return
	}
	cl := c.eksOwnCluster(w, caller, r.PathValue("name"))
	if cl == nil {
		return
	}
	acct := cl.Account
	sc := in.ScalingConfig
	msg := ""
	switch {
	case cl.made == nil || !c.active(cl):
		eksError(w, http.StatusBadRequest, "InvalidRequestException", "Cluster '"+cl.Name+"' is not in ACTIVE status")
		return
	case len(in.InstanceTypes) != 1 || !knownMachine(space.AWS, in.InstanceTypes[0]):
		msg = fmt.Sprintf("Instance type %s is not supported. Supported instance types: %s.",
			strings.Join(in.InstanceTypes, ","), strings.Join(MachineTypes[space.AWS], ", "))
	case poolSizes(sc.MinSize, sc.MaxSize, sc.DesiredSize) != "":
		msg = "Invalid scaling configuration: " + poolSizes(sc.MinSize, sc.MaxSize, sc.DesiredSize)
	default:
		if msg = roleRefusal(acct, in.NodeRole); msg == "" {
			msg = c.subnetRefusal(acct, in.Subnets)
		}
	}
	if msg != "" {
		eksError(w, http.StatusBadRequest, "InvalidParameterException", msg)
		return
	}
	ng := &nodegroup{name: in.NodegroupName, token: in.ClientRequestToken, instanceType: in.InstanceTypes[0],
		min: sc.MinSize, max: sc.MaxSize, desired: sc.DesiredSize, tags: in.Tags, subnets: in.Subnets, role: in.NodeRole,
		readyAt: c.opts.Now().Add(c.opts.CreateDelay)}
	c.mu.Lock()
	inUse := c.nodesInUse(space.AWS, acct)
	cur := cl.made.nodegroup
	if cur == nil && inUse+ng.max <= c.nodeQuota() {
		cl.made.nodegroup = ng
	}
	c.mu.Unlock()
	switch {
	case cur != nil && (cur.name != ng.name || cur.token != ng.token || ng.token == ""):
		eksError(w, http.StatusConflict, "ResourceInUseException",
			"NodeGroup already exists with name "+cur.name+" and cluster name "+cl.Name)
		return
	case cur != nil:
		ng = cur
	case inUse+ng.max > c.nodeQuota():
		eksError(w, http.StatusBadRequest, "ResourceLimitExceededException", (&quotaError{c.nodeQuota(), inUse, ng.max}).Error())
		return
	default:
		c.recorded(cl)
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodegroup": c.eksNodegroup(cl, ng)})
}

// eksDescribeNodegroup is eks:DescribeNodegroup.
func (c *Cloud) eksDescribeNodegroup(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.eksCaller(w, r, "DescribeNodegroup")
	if !ok {
		return
	}
	cl := c.eksOwnCluster(w, caller, r.PathValue("name"))
	if cl == nil {
		return
	}
	var ng *nodegroup
	c.mu.Lock()
	if cl.made != nil && cl.made.nodegroup != nil && cl.made.nodegroup.name == r.PathValue("ng") {
		ng = cl.made.nodegroup
	}
	c.mu.Unlock()
	if ng == nil {
		eksError(w, http.StatusNotFound, "ResourceNotFoundException", "No node group found for name: "+r.PathValue("ng")+".")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodegroup": c.eksNodegroup(cl, ng)})
}

func (c *Cloud) eksNodegroup(cl *Cluster, ng *nodegroup) map[string]any {
	status := "ACTIVE"
	if c.opts.Now().Before(ng.readyAt) {
		status = "CREATING"
	}
	return map[string]any{
		"nodegroupName": ng.name, "clusterName": cl.Name, "status": status, "nodeRole": ng.role,
		"nodegroupArn":  "arn:aws:eks:" + cl.Location + ":" + cl.Account + ":nodegroup/" + cl.Name + "/" + ng.name,
		"instanceTypes": []string{ng.instanceType}, "subnets": ng.subnets, "tags": ng.tags,
		"scalingConfig": map[string]int{"minSize": ng.min, "maxSize": ng.max, "desiredSize": ng.desired},
		"health":        map[string]any{"issues": []any{}},
	}
}
