package space

import (
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The naming rules each cloud publishes for the identifiers Spaces accepts.
var (
	// EKS: 1–100 characters, starts alphanumeric, then alphanumerics, - and _.
	eksClusterName = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]*$`) // at most 100: see maxLen (and Pattern)
	// An AWS region code in any partition, such as us-east-1 or
	// eusc-de-east-1: the regionRegex of each partition AWS publishes (the
	// SDKs' partitions.json), lowercase only.
	awsRegion = regexp.MustCompile(`^((us|eu|ap|sa|ca|me|af|il|mx|cn)-[a-z0-9]+|us-(gov|iso|isob|isof)-[a-z0-9]+|eu-isoe-[a-z0-9]+|eusc-de-[a-z0-9]+)-[0-9]+$`)
	// GKE: 1–40 characters, lowercase letters, digits and -, starts with a
	// letter, ends with a letter or digit.
	gkeClusterName = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`) // at most 40
	// GCP project id: 6–30 characters, lowercase letters, digits and -,
	// starts with a letter, does not end with -.
	gcpProjectID = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]$`)
	// GCP region (us-central1) or zone (us-central1-a).
	gcpLocation = regexp.MustCompile(`^[a-z]+-[a-z]+[1-9][0-9]?(-[a-z])?$`)
	// AKS: 1–63 characters, alphanumerics, _ and -, starting and ending
	// alphanumeric.
	aksClusterName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_-]*[A-Za-z0-9])?$`) // at most 63
	// Azure resource group: 1–90 characters, alphanumerics, _, -, ., ( and ),
	// not ending with a period.
	azureResourceGroup = regexp.MustCompile(`^[-\w.()]*[-\w()]$`) // at most 90
	uuidPattern        = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	// IAM role ARN in any partition AWS publishes; the role's path and name
	// (group 2) are at most 512 characters: see maxGroup.
	iamRoleARN = regexp.MustCompile(`^arn:aws(-cn|-us-gov|-iso|-iso-b|-iso-e|-iso-f|-eusc)?:iam::[0-9]{12}:role/([\w+=,.@/-]+)$`)
	// sts:AssumeRole ExternalId: 2–1224 characters of [\w+=,.@:/-].
	externalID = regexp.MustCompile(`^[\w+=,.@:/-]{2,}$`) // at most 1224: see maxLen
	// A Google service account: name@project.iam.gserviceaccount.com.
	gcpServiceAccount = regexp.MustCompile(`^[a-z][-a-z0-9]{4,28}[a-z0-9]@[a-z][-a-z0-9]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com$`)
)

type rule struct {
	re     *regexp.Regexp
	hint   string
	maxLen int // beyond what re can express; 0: re says it all
	// maxGroup bounds the length of re's last group likewise. A counted
	// repetition such as {1,512} compiles into a program that large, which
	// every cold start of every function paid for (~8 ms).
	maxGroup int
}

func (r rule) ok(v string) bool {
	if r.maxLen > 0 && len(v) > r.maxLen {
		return false
	}
	if r.maxGroup == 0 {
		return r.re.MatchString(v)
	}
	m := r.re.FindStringSubmatch(v)
	return m != nil && len(m[len(m)-1]) <= r.maxGroup
}

// RoleARN is the rule of an IAM role ARN, for the fields beside a
// connection that name one (a provisioning job's cluster and node roles).
func RoleARN(v string) bool { return connectionKeys[AWS]["roleArn"].ok(v) }

// configKeys is the one definition of each provider's identity keys.
var configKeys = map[Provider]map[string]rule{
	AWS: {
		"clusterName": {re: eksClusterName, hint: "an EKS cluster name: 1-100 letters, digits, '-' or '_', starting with a letter or digit", maxLen: 100},
		"region":      {re: awsRegion, hint: "an AWS region code such as us-east-1"},
	},
	GCP: {
		"clusterName": {re: gkeClusterName, hint: "a GKE cluster name: 1-40 lowercase letters, digits or '-', starting with a letter and ending with a letter or digit", maxLen: 40},
		"region":      {re: gcpLocation, hint: "a GCP region or zone such as us-central1 or us-central1-a"},
		"projectId":   {re: gcpProjectID, hint: "a GCP project id: 6-30 lowercase letters, digits or '-', starting with a letter"},
	},
	Azure: {
		"clusterName":    {re: aksClusterName, hint: "an AKS cluster name: 1-63 letters, digits, '-' or '_', starting and ending with a letter or digit", maxLen: 63},
		"resourceGroup":  {re: azureResourceGroup, hint: "an Azure resource group name: 1-90 letters, digits, '_', '-', '.', '(' or ')', not ending with '.'", maxLen: 90},
		"subscriptionId": {re: uuidPattern, hint: "an Azure subscription id (a UUID)"},
	},
}

// connectionKeys is the one definition of each provider's cloud-account
// connection keys. None of them is a secret.
var connectionKeys = map[Provider]map[string]rule{
	AWS: {
		"roleArn":    {re: iamRoleARN, hint: "an IAM role ARN such as arn:aws:iam::123456789012:role/spaces", maxGroup: 512},
		"externalId": {re: externalID, hint: "an sts:AssumeRole external id: 2-1224 characters of letters, digits and +=,.@:/-", maxLen: 1224},
	},
	GCP: {
		"projectId":           {re: gcpProjectID, hint: "a GCP project id: 6-30 lowercase letters, digits or '-', starting with a letter"},
		"serviceAccountEmail": {re: gcpServiceAccount, hint: "a service account email such as spaces@my-project.iam.gserviceaccount.com"},
	},
	Azure: {
		"tenantId":       {re: uuidPattern, hint: "an Entra tenant id (a UUID)"},
		"clientId":       {re: uuidPattern, hint: "an Entra application (client) id (a UUID)"},
		"subscriptionId": {re: uuidPattern, hint: "an Azure subscription id (a UUID)"},
	},
}

// ConfigKeys returns the identity keys a provider requires, sorted.
func ConfigKeys(p Provider) []string { return sortedKeys(configKeys[p]) }

// ConnectionKeys returns the connection keys a provider requires, sorted.
func ConnectionKeys(p Provider) []string { return sortedKeys(connectionKeys[p]) }

func sortedKeys(m map[string]rule) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkKeys validates that m holds exactly the keys in rules, each matching
// its rule, and records every problem under prefix.
func checkKeys(fe *fieldErrors, prefix string, m map[string]string, rules map[string]rule) {
	for _, k := range sortedKeys(rules) {
		v, ok := m[k]
		switch {
		case !ok:
			fe.add(prefix+"."+k, "is required")
		case !rules[k].ok(v):
			fe.add(prefix+"."+k, "must be %s", rules[k].hint)
		}
	}
	extra := make([]string, 0)
	for k := range m {
		if _, ok := rules[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		fe.add(prefix+"."+k, "is not a known key; allowed: %s", strings.Join(sortedKeys(rules), ", "))
	}
}

func checkProvider(fe *fieldErrors, p Provider) bool {
	switch {
	case p == "":
		fe.add("provider", "is required")
	case !p.Valid():
		fe.add("provider", "must be one of aws, gcp, azure")
	default:
		return true
	}
	return false
}

// ValidID reports whether s is a UUID in canonical form.
func ValidID(s string) bool { return uuidPattern.MatchString(s) }

const maxNameLen = 100

// checkText refuses free text (a reason) that is not valid UTF-8, is longer
// than max characters or holds characters that hide or reorder what is
// displayed (see invisible).
func checkText(fe *fieldErrors, field, s string, max int) {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > max {
		fe.add(field, "must be at most %d characters of valid UTF-8", max)
		return
	}
	for _, r := range s {
		if invisible(r) {
			fe.add(field, "must not contain control, format or invisible characters (such as U+%04X)", r)
			return
		}
	}
}

func checkName(fe *fieldErrors, name string) {
	if name == "" {
		return
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxNameLen || strings.TrimSpace(name) != name {
		fe.add("name", "must be at most %d characters without leading or trailing spaces", maxNameLen)
		return
	}
	for _, r := range name {
		if invisible(r) {
			fe.add("name", "must not contain control, format or invisible characters (such as U+%04X)", r)
			return
		}
	}
}

// invisible reports characters that make a name look like another one or
// reorder what is displayed: anything but letters, marks, digits,
// punctuation, symbols and plain spaces, so C0 and C1 controls, format
// characters (the BOM, zero-width characters, bidi overrides), line
// separators, private-use and unassigned code points, and the replacement
// character that broken encodings leave.
func invisible(r rune) bool {
	return r == unicode.ReplacementChar || !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs)
}
