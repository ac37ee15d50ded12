package provisioning

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"spaces/shared/space"
)

// Input is what a caller supplies to provision a cluster.
type Input struct {
	Name           string
	Provider       space.Provider
	CloudAccountID string
	Config         space.Config
	Spec           space.ClusterSpec
	// Null lists the body's fields given as JSON null (spec.node_pool.min_nodes,
	// spec.tags.team): null is not a value, and its zero may pass for one.
	Null []string `json:"-"`
}

// The shapes each cloud publishes for what a spec names. Whether a version
// or machine type exists is the cloud's to say (its refusal fails the job
// with its own words); these catch what no cloud would take.
var (
	kubeMinor = regexp.MustCompile(`^1\.[0-9]{1,2}$`)
	// EC2 instance types: family and generation, a dot, a size (m5.large,
	// t3a.xlarge, m7g.metal-48xl).
	ec2Type = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9-]+$`)
	// GCE machine types: e2-standard-4, n2d-highmem-8, custom-4-16384.
	gceType = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)+$`)
	// Azure VM sizes: Standard_D4s_v5.
	azureSize   = regexp.MustCompile(`^Standard_[A-Za-z0-9_]+$`)
	awsSubnet   = regexp.MustCompile(`^subnet-([0-9a-f]{8}|[0-9a-f]{17})$`)
	awsSG       = regexp.MustCompile(`^sg-([0-9a-f]{8}|[0-9a-f]{17})$`)
	gcpNetName  = space.MustPattern(`^[a-z]([-a-z0-9]*[a-z0-9])?$`, 63)
	azureRegion = space.MustPattern(`^[a-z][a-z0-9]{2,}$`, 40)
	// The group, network and subnet names are 1–90, 2–64 and 1–80
	// characters: see azureSubnetID (space.Pattern says why not here).
	azureSubnet = regexp.MustCompile(`(?i)^/subscriptions/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/resourceGroups/([-\w.()]+)/providers/Microsoft\.Network/virtualNetworks/([-\w.]{2,})/subnets/([-\w.]+)$`)
	// GCP labels: keys start with a lowercase letter or an international
	// character; keys and values hold lowercase letters, international
	// characters, digits, '_' and '-'; 1-63 and 0-63 characters.
	// https://cloud.google.com/compute/docs/labeling-resources#requirements
	gcpLabelKey = regexp.MustCompile(`^[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]*$`)
	gcpLabelVal = regexp.MustCompile(`^[\p{Ll}\p{Lo}\p{N}_-]*$`)
	// Azure tag names may not hold < > % & \ ? /; a name is 1-512
	// characters, a value 0-256, at most 50 tags.
	// https://learn.microsoft.com/en-us/azure/azure-resource-manager/management/tag-resources#limitations
	azureTagBad = regexp.MustCompile(`[<>%&\\?/]`)
	// AWS tags: letters, digits and spaces representable in UTF-8, and
	// + - = . _ : / @; key 1-128, value 0-256; no aws: prefix; 50 per
	// resource.
	// https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html#tag-conventions
	// https://docs.aws.amazon.com/eks/latest/userguide/eks-using-tags.html#tag-restrictions
	awsTagChars  = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$`)
	maxNodes     = 1000
	maxTags      = 50
	maxSecGroups = 5
	maxSubnets   = 16
)

// Validate reports every bad field of in at once: the space's own fields
// as POST /spaces checks them, and the spec as the provider needs it.
func (in Input) Validate() error {
	var fe []space.FieldError
	add := func(field, format string, args ...any) {
		fe = append(fe, space.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	// The space's own fields, exactly as a registration checks them.
	if err := in.registerInput().Validate(); err != nil {
		e, ok := err.(*space.Error)
		if !ok {
			return err
		}
		fe = append(fe, e.Fields...)
	}
	for _, at := range in.Null {
		add(at, "must not be null: give a value or leave the field out")
	}
	s := in.Spec
	switch {
	case s.KubernetesVersion == "":
		add("spec.kubernetes_version", "is required")
	case !kubeMinor.MatchString(s.KubernetesVersion):
		add("spec.kubernetes_version", "must be a Kubernetes minor version such as 1.31")
	}
	for field, v := range map[string]string{"cluster_role_arn": s.ClusterRoleARN, "node_role_arn": s.NodeRoleARN} {
		switch {
		case v == "":
		case in.Provider != space.AWS:
			add("spec."+field, "does not apply to %s", in.Provider)
		case !space.RoleARN(v):
			add("spec."+field, "must be an IAM role ARN such as arn:aws:iam::123456789012:role/eks-cluster")
		}
	}
	checkPool(add, in.Provider, s.NodePool)
	checkNetwork(add, in.Provider, in.Config, s.Network)
	checkTags(add, in.Provider, s.Tags)
	if len(fe) == 0 {
		return nil
	}
	sort.SliceStable(fe, func(i, j int) bool { return fe[i].Field < fe[j].Field })
	return &space.Error{Kind: space.KindInvalid, Message: "the provisioning job is not valid", Fields: fe}
}

func (in Input) registerInput() space.RegisterInput {
	return space.RegisterInput{Name: in.Name, Provider: in.Provider, SpaceType: space.TypeKubernetes,
		CloudAccountID: in.CloudAccountID, Config: in.Config}
}

type adder func(field, format string, args ...any)

func checkPool(add adder, p space.Provider, np space.NodePool) {
	const f = "spec.node_pool."
	switch {
	case np.MachineType == "":
		add(f+"machine_type", "is required")
	case p == space.AWS && !ec2Type.MatchString(np.MachineType):
		add(f+"machine_type", "must be an EC2 instance type such as m5.large")
	case p == space.GCP && !gceType.MatchString(np.MachineType):
		add(f+"machine_type", "must be a GCE machine type such as e2-standard-4")
	case p == space.Azure && !azureSize.MatchString(np.MachineType):
		add(f+"machine_type", "must be an Azure VM size such as Standard_D4s_v5")
	case len(np.MachineType) > 64:
		add(f+"machine_type", "must be at most 64 characters")
	}
	// AKS's system pool needs a node at all times; EKS and GKE pools may
	// scale to zero.
	least := 0
	if p == space.Azure {
		least = 1
	}
	if np.Max < 1 || np.Max > maxNodes {
		add(f+"max_nodes", "must be between 1 and %d", maxNodes)
	}
	switch {
	case np.Min < least:
		add(f+"min_nodes", "must be at least %d", least)
	case np.Min > np.Max:
		add(f+"min_nodes", "must not exceed max_nodes (%d)", np.Max)
	}
	if np.Desired < np.Min || np.Desired > np.Max || np.Desired < least {
		add(f+"desired_nodes", "must be between min_nodes and max_nodes (%d-%d)", max(np.Min, least), np.Max)
	}
}

func checkNetwork(add adder, p space.Provider, cfg space.Config, n space.Network) {
	const f = "spec.network."
	notFor := func(field string, set bool) {
		if set {
			add(f+field, "does not apply to %s", p)
		}
	}
	switch p {
	case space.AWS:
		switch {
		case len(n.SubnetIDs) < 2:
			add(f+"subnet_ids", "must name at least two subnets, in two availability zones (EKS requires it)")
		case len(n.SubnetIDs) > maxSubnets:
			add(f+"subnet_ids", "must name at most %d subnets", maxSubnets)
		}
		checkIDs(add, f+"subnet_ids", n.SubnetIDs, awsSubnet, "a subnet id such as subnet-0a1b2c3d")
		if len(n.SecurityGroupIDs) > maxSecGroups {
			add(f+"security_group_ids", "must name at most %d security groups", maxSecGroups)
		}
		checkIDs(add, f+"security_group_ids", n.SecurityGroupIDs, awsSG, "a security group id such as sg-0a1b2c3d")
		notFor("network", n.Network != "")
		notFor("subnetwork", n.Subnetwork != "")
		notFor("location", n.Location != "")
		notFor("vnet_subnet_id", n.VNetSubnetID != "")
	case space.GCP:
		for field, v := range map[string]string{"network": n.Network, "subnetwork": n.Subnetwork} {
			switch {
			case v == "":
				add(f+field, "is required")
			case !gcpNetName.MatchString(v):
				add(f+field, "must be a VPC %s name: 1-63 lowercase letters, digits or '-', starting with a letter", field)
			}
		}
		notFor("subnet_ids", len(n.SubnetIDs) > 0)
		notFor("security_group_ids", len(n.SecurityGroupIDs) > 0)
		notFor("location", n.Location != "")
		notFor("vnet_subnet_id", n.VNetSubnetID != "")
	case space.Azure:
		switch {
		case n.Location == "":
			add(f+"location", "is required")
		case !azureRegion.MatchString(n.Location):
			add(f+"location", "must be an Azure location such as eastus or westeurope")
		}
		switch m := azureSubnetID(n.VNetSubnetID); {
		case n.VNetSubnetID == "":
			add(f+"vnet_subnet_id", "is required")
		case m == nil:
			add(f+"vnet_subnet_id", "must be a subnet resource id: /subscriptions/{id}/resourceGroups/{group}/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/{subnet}")
		case cfg["subscriptionId"] != "" && !strings.EqualFold(m[1], cfg["subscriptionId"]):
			add(f+"vnet_subnet_id", "must be in the cluster's subscription (config.subscriptionId)")
		}
		notFor("subnet_ids", len(n.SubnetIDs) > 0)
		notFor("security_group_ids", len(n.SecurityGroupIDs) > 0)
		notFor("network", n.Network != "")
		notFor("subnetwork", n.Subnetwork != "")
	}
}

// azureSubnetID matches a subnet resource id: nil, or the match with the
// subscription id as m[1].
func azureSubnetID(id string) []string {
	m := azureSubnet.FindStringSubmatch(id)
	if m == nil || utf8.RuneCountInString(m[2]) > 90 || utf8.RuneCountInString(m[3]) > 64 || utf8.RuneCountInString(m[4]) > 80 {
		return nil
	}
	return m
}

func checkIDs(add adder, field string, ids []string, re *regexp.Regexp, hint string) {
	seen := map[string]bool{}
	for i, id := range ids {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case !re.MatchString(id):
			add(at, "must be %s", hint)
		case seen[id]:
			add(at, "repeats %s", id)
		}
		seen[id] = true
	}
}

// gcpLabel matches a label key or value of at most 63 characters.
func gcpLabel(re *regexp.Regexp, s string) bool {
	return utf8.RuneCountInString(s) <= 63 && re.MatchString(s)
}

// printable reports whether s holds only letters, marks, numbers,
// punctuation, symbols and spaces: no control (NUL, BEL, line breaks),
// format (bidirectional overrides and isolates, zero-width joiners),
// private-use, surrogate or unassigned code point, which no cloud takes
// in a tag and which would reach one only to be refused, or to mislead a
// reader of the console or a bill.
func printable(s string) bool {
	for _, r := range s {
		if !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z) {
			return false
		}
	}
	return true
}

// checkTags applies each cloud's tag (label) rules, after the one all
// clouds share (printable).
func checkTags(add adder, p space.Provider, tags map[string]string) {
	const f = "spec.tags"
	if len(tags) > maxTags {
		add(f, "must hold at most %d entries", maxTags)
	}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, at := tags[k], f+"."+k
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			add(at, "must be valid UTF-8")
			continue
		}
		if !printable(k) || !printable(v) {
			add(at, "must not hold control or format characters (such as NUL, line breaks or bidirectional overrides)")
			continue
		}
		switch p {
		case space.AWS:
			switch {
			case k == "" || utf8.RuneCountInString(k) > 128 || utf8.RuneCountInString(v) > 256:
				add(at, "must have a key of 1-128 and a value of at most 256 characters")
			case strings.HasPrefix(strings.ToLower(k), "aws:"):
				add(at, "must not use the reserved prefix aws:")
			case !awsTagChars.MatchString(k) || !awsTagChars.MatchString(v):
				add(at, "may hold only letters, digits, spaces and _ . : / = + - @")
			}
		case space.GCP:
			if !gcpLabel(gcpLabelKey, k) || !gcpLabel(gcpLabelVal, v) {
				add(at, "must be a GCP label: a key of 1-63 lowercase letters, digits, '_' or '-' starting with a letter, a value of at most 63 of them")
			}
		case space.Azure:
			switch {
			case k == "" || utf8.RuneCountInString(k) > 512 || utf8.RuneCountInString(v) > 256:
				add(at, "must have a key of 1-512 and a value of at most 256 characters")
			case azureTagBad.MatchString(k):
				add(at, "must not hold < > %% & \\ ? / in its key")
			}
		}
	}
}
