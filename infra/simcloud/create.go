package simcloud

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"spaces/shared/space"
)

// What the simulated clouds create: the Kubernetes minor versions and
// machine types they offer. Anything else is refused with the cloud's own
// kind of message.
var (
	// SupportedVersions are the minor versions each cloud creates (GKE and
	// AKS also take a patch version of one of them).
	SupportedVersions = map[space.Provider][]string{
		space.AWS:   {"1.29", "1.30", "1.31", "1.32"},
		space.GCP:   {"1.30", "1.31", "1.32"},
		space.Azure: {"1.30", "1.31", "1.32"},
	}
	// MachineTypes are the EC2 instance types, GCE machine types and Azure
	// VM sizes a node pool may use.
	MachineTypes = map[space.Provider][]string{
		space.AWS: {"t3.medium", "t3.large", "t3.xlarge", "m5.large", "m5.xlarge", "m6i.large", "m6i.xlarge",
			"m7g.large", "c6i.large", "r6i.large"},
		space.GCP: {"e2-standard-2", "e2-standard-4", "e2-standard-8", "n2-standard-2", "n2-standard-4",
			"n2d-standard-2", "c3-standard-4", "t2a-standard-2"},
		space.Azure: {"Standard_B2s", "Standard_D2s_v3", "Standard_D4s_v3", "Standard_D2s_v5", "Standard_D4s_v5",
			"Standard_D8s_v5", "Standard_E4s_v5"},
	}
)

// DefaultNodeQuota is how many nodes (the node pools' maximum sizes added
// up) an account may have in the clusters the cloud created, unless
// Options.NodeQuota says otherwise.
const DefaultNodeQuota = 100

// Backend is an API server that serves the clusters the cloud creates: a
// real kube-apiserver asking WebhookURL(Key) about tokens, or a light
// testcluster checking TokenCheck(Key). Several clusters share it; the
// token review tells them apart by the cluster a token names (EKS) and the
// principals each cluster grants.
type Backend struct {
	Key    string
	Server string
	CAPEM  []byte
}

// creation is what the cloud knows of a cluster it created.
type creation struct {
	token    string // EKS client request token
	creator  string // the principal that created it (its cluster admin)
	readyAt  time.Time
	version  string
	tags     map[string]string
	op       string // GKE operation id
	maxNodes int    // GKE and AKS: the node pool's maximum (quota)
	// nodegroup is the EKS managed node group, nil until CreateNodegroup;
	// read and written under Cloud.mu.
	nodegroup *nodegroup
	subnets   []string
}

type nodegroup struct {
	name, token  string
	readyAt      time.Time
	instanceType string
	min, max     int
	desired      int
	tags         map[string]string
	subnets      []string
	role         string
}

// SetCreationBackend makes b serve every cluster the cloud creates from now
// on; without one, creations answer that the cloud is unavailable.
func (c *Cloud) SetCreationBackend(b Backend) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.backend = &b
}

// AllowCreate lets principal create clusters in account (the AWS account
// id, GCP project or Azure subscription): the customer's grant of
// eks:CreateCluster, container.clusters.create or
// Microsoft.ContainerService/managedClusters/write to the identity Spaces
// acts as.
func (c *Cloud) AllowCreate(account, principal string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creators[account+"\x00"+principal] = true
}

// AddNetwork makes a network exist for creations to name, in account:
//
//	aws:   a subnet id with its availability zone as where, or a security
//	       group id (sg-...) with where empty
//	gcp:   a VPC network name (where empty), or a subnetwork name with its
//	       network as where; the network "default" always exists
//	azure: a VNet subnet's resource id (where empty)
func (c *Cloud) AddNetwork(p space.Provider, account, id, where string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.networks[string(p)+"\x00"+account+"\x00"+id] = where
}

// network reports whether id exists in account, and where it is.
func (c *Cloud) network(p space.Provider, account, id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	where, ok := c.networks[string(p)+"\x00"+account+"\x00"+id]
	return where, ok
}

func (c *Cloud) mayCreate(account, principal string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creators[account+"\x00"+principal]
}

// Created counts the clusters the cloud created for provider (a repeated
// request that found its creation under way is not counted): the proof
// that a crash after the cloud call made one cluster, not two.
func (c *Cloud) Created(p space.Provider) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.created[p]
}

// active reports whether cl is up: created ones once their delay passed.
func (c *Cloud) active(cl *Cluster) bool {
	return cl.made == nil || !c.opts.Now().Before(cl.made.readyAt)
}

// quotaError is a creation beyond the account's node quota.
type quotaError struct{ quota, inUse, asked int }

func (e *quotaError) Error() string { return quotaMessage("nodes", e.quota, e.inUse, e.asked) }

// create adds a cluster the caller asked for, unless the name is taken:
// then it returns the cluster that holds it, and false. A node pool beyond
// the quota is a *quotaError.
func (c *Cloud) create(cl Cluster, made *creation) (*Cluster, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.clusters {
		if o.Provider == cl.Provider && strings.EqualFold(o.Account, cl.Account) && strings.EqualFold(o.Name, cl.Name) &&
			(cl.Provider == space.Azure && strings.EqualFold(o.ResourceGroup, cl.ResourceGroup) ||
				cl.Provider != space.Azure && o.Location == cl.Location) {
			// A copy of its creation too: ForgetRequestTokens changes it.
			cp := *o
			if o.made != nil {
				m := *o.made
				cp.made = &m
			}
			return &cp, false, nil
		}
	}
	if c.backend == nil {
		return nil, false, errNoBackend
	}
	if n := c.nodesInUse(cl.Provider, cl.Account); n+made.maxNodes > c.nodeQuota() {
		return nil, false, &quotaError{quota: c.nodeQuota(), inUse: n, asked: made.maxNodes}
	}
	cl.Server, cl.CAPEM, cl.Backend = c.backend.Server, c.backend.CAPEM, c.backend.Key
	cl.Principals = []string{made.creator}
	made.readyAt = c.opts.Now().Add(c.opts.CreateDelay)
	cl.made = made
	c.clusters = append(c.clusters, &cl)
	c.created[cl.Provider]++
	cp := cl
	return &cp, true, nil
}

var errNoBackend = fmt.Errorf("the simulated cloud has no API server for new clusters (SetCreationBackend)")

// nodesInUse adds up the maximum sizes of the node pools created in
// account; the caller holds c.mu.
func (c *Cloud) nodesInUse(p space.Provider, account string) int {
	n := 0
	for _, cl := range c.clusters {
		if cl.made == nil || cl.Provider != p || !strings.EqualFold(cl.Account, account) {
			continue
		}
		n += cl.made.maxNodes
		if ng := cl.made.nodegroup; ng != nil {
			n += ng.max
		}
	}
	return n
}

func (c *Cloud) nodeQuota() int {
	if c.opts.NodeQuota > 0 {
		return c.opts.NodeQuota
	}
	return DefaultNodeQuota
}

// supportedVersion matches a requested version against the cloud's: a
// minor version, or (allowPatch) a patch release of one.
func supportedVersion(p space.Provider, v string, allowPatch bool) bool {
	for _, s := range SupportedVersions[p] {
		if v == s || allowPatch && strings.HasPrefix(v, s+".") {
			return true
		}
	}
	return false
}

// poolSizes checks a node pool's sizes as every cloud does; it returns the
// problem in the words given.
func poolSizes(min, max, desired int) string {
	switch {
	case max < 1:
		return "the maximum node count must be at least 1"
	case min < 0 || min > max:
		return fmt.Sprintf("the minimum node count %d must be between 0 and the maximum %d", min, max)
	case desired < min || desired > max:
		return fmt.Sprintf("the desired node count %d must be between the minimum %d and the maximum %d", desired, min, max)
	}
	return ""
}

var (
	eksName = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`)
	gkeName = regexp.MustCompile(`^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$`)
	aksName = regexp.MustCompile(`^[a-zA-Z0-9](?:[-_a-zA-Z0-9]{0,61}[a-zA-Z0-9])?$`)
)

func joinVersions(p space.Provider) string { return strings.Join(SupportedVersions[p], ", ") }

func quotaMessage(resource string, quota, inUse, asked int) string {
	return "Quota exceeded for " + resource + ": limit " + strconv.Itoa(quota) + ", in use " + strconv.Itoa(inUse) +
		", requested " + strconv.Itoa(asked) + "."
}

func knownMachine(p space.Provider, t string) bool { return slices.Contains(MachineTypes[p], t) }

// ForgetRequestTokens drops the client request tokens EKS remembers, as
// EKS does after a while: a repeated request then meets the taken name
// (ResourceInUseException) instead of its own creation.
func (c *Cloud) ForgetRequestTokens() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clusters {
		if cl.made != nil && cl.Provider == space.AWS {
			cl.made.token = ""
			if cl.made.nodegroup != nil {
				cl.made.nodegroup.token = ""
			}
		}
	}
}

// Record is a cluster the cloud created, as kept across restarts of the
// process that runs the cloud (Options.OnCreate, Restore): a real cloud
// does not forget its clusters.
type Record struct {
	Provider      space.Provider    `json:"provider"`
	Name          string            `json:"name"`
	Account       string            `json:"account"`
	Location      string            `json:"location,omitempty"`
	ResourceGroup string            `json:"resourceGroup,omitempty"`
	Creator       string            `json:"creator"`
	Token         string            `json:"token,omitempty"`
	Version       string            `json:"version"`
	Op            string            `json:"op,omitempty"`
	Tags          map[string]string `json:"tags,omitempty"`
	MaxNodes      int               `json:"maxNodes,omitempty"`
	Subnets       []string          `json:"subnets,omitempty"`
	ReadyAt       time.Time         `json:"readyAt"`
	Nodegroup     *NodegroupRecord  `json:"nodegroup,omitempty"`
}

// NodegroupRecord is an EKS node group in a Record.
type NodegroupRecord struct {
	Name         string            `json:"name"`
	Token        string            `json:"token,omitempty"`
	InstanceType string            `json:"instanceType"`
	Role         string            `json:"role"`
	Min          int               `json:"min"`
	Max          int               `json:"max"`
	Desired      int               `json:"desired"`
	Tags         map[string]string `json:"tags,omitempty"`
	Subnets      []string          `json:"subnets,omitempty"`
	ReadyAt      time.Time         `json:"readyAt"`
}

// recordOf is cl as a Record; the caller holds c.mu.
func recordOf(cl *Cluster) Record {
	m := cl.made
	r := Record{Provider: cl.Provider, Name: cl.Name, Account: cl.Account, Location: cl.Location, ResourceGroup: cl.ResourceGroup,
		Creator: m.creator, Token: m.token, Version: m.version, Op: m.op, Tags: m.tags, MaxNodes: m.maxNodes,
		Subnets: m.subnets, ReadyAt: m.readyAt}
	if ng := m.nodegroup; ng != nil {
		r.Nodegroup = &NodegroupRecord{Name: ng.name, Token: ng.token, InstanceType: ng.instanceType, Role: ng.role,
			Min: ng.min, Max: ng.max, Desired: ng.desired, Tags: ng.tags, Subnets: ng.subnets, ReadyAt: ng.readyAt}
	}
	return r
}

// recorded tells Options.OnCreate about the created cluster called like
// cl (after a creation or a node group).
func (c *Cloud) recorded(cl *Cluster) {
	if c.opts.OnCreate == nil {
		return
	}
	c.mu.Lock()
	var r *Record
	for _, o := range c.clusters {
		if o.made != nil && o.Provider == cl.Provider && o.Account == cl.Account && o.Name == cl.Name &&
			o.Location == cl.Location && o.ResourceGroup == cl.ResourceGroup {
			rec := recordOf(o)
			r = &rec
		}
	}
	c.mu.Unlock()
	if r != nil {
		c.opts.OnCreate(*r)
	}
}

// Restore brings back a cluster the cloud created before a restart, on
// the creation backend (SetCreationBackend first); a name already taken
// keeps its cluster.
func (c *Cloud) Restore(r Record) error {
	made := &creation{token: r.Token, creator: r.Creator, readyAt: r.ReadyAt, version: r.Version, tags: r.Tags, op: r.Op,
		maxNodes: r.MaxNodes, subnets: r.Subnets}
	if ng := r.Nodegroup; ng != nil {
		made.nodegroup = &nodegroup{name: ng.Name, token: ng.Token, readyAt: ng.ReadyAt, instanceType: ng.InstanceType,
			min: ng.Min, max: ng.Max, desired: ng.Desired, tags: ng.Tags, subnets: ng.Subnets, role: ng.Role}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.backend == nil {
		return errNoBackend
	}
	for _, o := range c.clusters {
		if o.Provider == r.Provider && strings.EqualFold(o.Account, r.Account) && strings.EqualFold(o.Name, r.Name) &&
			o.Location == r.Location && strings.EqualFold(o.ResourceGroup, r.ResourceGroup) {
			return nil
		}
	}
	c.clusters = append(c.clusters, &Cluster{Provider: r.Provider, Name: r.Name, Account: r.Account, Location: r.Location,
		ResourceGroup: r.ResourceGroup, Server: c.backend.Server, CAPEM: c.backend.CAPEM, Backend: c.backend.Key,
		Principals: []string{r.Creator}, made: made})
	return nil
}

// Creator is a customer ready to create clusters in each cloud: its
// accounts, the identity it allows to create in each, and its networks.
// The demo and the tests each have one.
type Creator struct {
	AWSAccount, AWSRegion, RoleARN    string
	SubnetA, SubnetB, SecurityGroup   string
	GCPProject, ServiceAccount        string
	GCPNetwork, GCPSubnetwork         string
	AzureSubscription, AzurePrincipal string
	AzureLocation, AzureSubnet        string
}

// Allow grants the customer's identities creation and records its networks
// (the subnets in zones a and b of AWSRegion).
func (cr Creator) Allow(c *Cloud) {
	c.AllowCreate(cr.AWSAccount, cr.RoleARN)
	c.AllowCreate(cr.GCPProject, cr.ServiceAccount)
	c.AllowCreate(cr.AzureSubscription, cr.AzurePrincipal)
	c.AddNetwork(space.AWS, cr.AWSAccount, cr.SubnetA, cr.AWSRegion+"a")
	c.AddNetwork(space.AWS, cr.AWSAccount, cr.SubnetB, cr.AWSRegion+"b")
	c.AddNetwork(space.AWS, cr.AWSAccount, cr.SecurityGroup, "")
	c.AddNetwork(space.GCP, cr.GCPProject, cr.GCPNetwork, "")
	c.AddNetwork(space.GCP, cr.GCPProject, cr.GCPSubnetwork, cr.GCPNetwork)
	c.AddNetwork(space.Azure, cr.AzureSubscription, cr.AzureSubnet, "")
}

// Spec is a cluster spec the simulated cloud of p accepts in the
// customer's networks.
func (cr Creator) Spec(p space.Provider) space.ClusterSpec {
	s := space.ClusterSpec{KubernetesVersion: "1.31", NodePool: space.NodePool{Min: 1, Max: 3, Desired: 2}}
	switch p {
	case space.AWS:
		s.NodePool.MachineType = "t3.large"
		s.Network = space.Network{SubnetIDs: []string{cr.SubnetA, cr.SubnetB}, SecurityGroupIDs: []string{cr.SecurityGroup}}
	case space.GCP:
		s.NodePool.MachineType = "e2-standard-4"
		s.Network = space.Network{Network: cr.GCPNetwork, Subnetwork: cr.GCPSubnetwork}
	case space.Azure:
		s.NodePool.MachineType = "Standard_D4s_v5"
		s.Network = space.Network{Location: cr.AzureLocation, VNetSubnetID: cr.AzureSubnet}
	}
	return s
}
