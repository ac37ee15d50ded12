package mint_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/infra/kubetest"
	"spaces/infra/minttest"
	"spaces/infra/simcloud"
	"spaces/infra/testwait"
	"spaces/shared/kubeapply"
	"spaces/shared/mint/eks"
	"spaces/shared/space"
)

// advance polls a creation until it is done (bounded), as the provisioning
// job does one step at a time, and returns the stages it went through.
func advance(t *testing.T, env *minttest.Env, acct space.CloudAccount, cfg space.Config, spec space.ClusterSpec, token string, p space.CreateProgress) []string {
	t.Helper()
	stages := []string{p.Operation.Stage}
	err := testwait.UntilEvery(testwait.Timeout, 200*time.Millisecond, func() bool {
		if p.Done {
			return true
		}
		var err error
		if p, err = env.Minter.Advance(t.Context(), acct, cfg, spec, token, p.Operation); err != nil {
			t.Fatalf("advance: %v", err)
		}
		if stages[len(stages)-1] != p.Operation.Stage {
			stages = append(stages, p.Operation.Stage)
		}
		return p.Done
	})
	if err != nil {
		t.Fatalf("creation not done %s: %+v", err, p)
	}
	return stages
}

// TestCreateEveryCloud: through the real SDKs, each cloud creates a cluster
// as the connected identity; a repeated first call (a crash after it) finds
// the same creation, and the cloud made one cluster; the cluster is not
// usable until the cloud says it is up; then it is listed, registers,
// mints, and a real kube-apiserver behind it takes a server-side applied
// ConfigMap with the minted credential. A second job for the same name is
// refused in the cloud's words.
func TestCreateEveryCloud(t *testing.T) {
	env := minttest.StartWith(t, simcloud.Options{CreateDelay: 2 * time.Second})
	kc := kubetest.Start(t, kubetest.Options{TokenWebhook: &kubetest.TokenWebhook{URL: env.Cloud.WebhookURL("created"), CAPEM: env.Cloud.CAPEM}})
	env.Cloud.SetCreationBackend(simcloud.Backend{Key: "created", Server: kc.URL, CAPEM: kc.CAPEM})
	minttest.AllowCreation(env.Cloud)
	admin := kubernetes.NewForConfigOrDie(kc.RESTConfig())

	for _, p := range space.Providers {
		t.Run(string(p), func(t *testing.T) {
			ctx := t.Context()
			name, acct, spec, token := "made-"+string(p), env.Accounts[p], minttest.Spec(p), uuid.NewString()
			cfg := minttest.Config(p, name)
			first, err := env.Minter.StartCreate(ctx, acct, cfg, spec, token)
			if err != nil || first.Done || first.Operation.ID == "" {
				t.Fatalf("start: %+v %v", first, err)
			}
			again, err := env.Minter.StartCreate(ctx, acct, cfg, spec, token)
			if err != nil || again.Operation != first.Operation {
				t.Fatalf("repeated start: %+v %v, want %+v", again, err, first.Operation)
			}
			if n := env.Cloud.Created(p); n != 1 {
				t.Fatalf("the cloud created %d clusters, want 1", n)
			}
			// Still being created: the cloud hands out no endpoint yet.
			if _, err := env.Minter.Providers[p].Mint(ctx, acct, space.Space{Provider: p, Config: cfg}); reasonOf(err) != space.ReasonCloudUnavailable {
				t.Fatalf("mint while creating: %v", err)
			}

			stages := advance(t, env, acct, cfg, spec, token, first)
			if want := map[space.Provider]string{space.AWS: "[cluster nodegroup]"}[p]; want != "" && strings.Join(stages, " ") != strings.Trim(want, "[]") {
				t.Errorf("stages %v, want %s", stages, want)
			}
			if p == space.AWS && env.Cloud.Calls("eks:CreateNodegroup") != 1 {
				t.Errorf("CreateNodegroup calls: %d", env.Cloud.Calls("eks:CreateNodegroup"))
			}
			// A step delivered again (the job's write lost) finds the
			// creation where it is, once EKS has forgotten the request
			// token too (the job's tag tells its own resources).
			for _, forget := range []bool{false, true} {
				if forget {
					env.Cloud.ForgetRequestTokens()
				}
				if again, err := env.Minter.StartCreate(ctx, acct, cfg, spec, token); err != nil || again.Operation != first.Operation {
					t.Errorf("start delivered again (forgotten tokens %v): %+v %v", forget, again, err)
				}
				if again, err := env.Minter.Advance(ctx, acct, cfg, spec, token, first.Operation); err != nil || !again.Done {
					t.Errorf("first step delivered again (forgotten tokens %v): %+v %v", forget, again, err)
				}
			}
			if n := env.Cloud.Created(p); n != 1 {
				t.Fatalf("the cloud created %d clusters, want 1", n)
			}

			list, err := env.Minter.ListClusters(ctx, acct, minttest.Region)
			if err != nil || !listed(list, name) {
				t.Fatalf("picker: %+v %v", list, err)
			}
			s := env.Register(t, p, name, false)
			creds, err := env.Minter.Mint(ctx, s)
			if err != nil {
				t.Fatalf("mint: %v", err)
			}
			ns := "team-" + string(p)
			if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "app"},
				"data": map[string]any{"cloud": string(p)}}
			if err := (&kubeapply.Applier{}).Apply(ctx, creds, ns, []map[string]any{cm}); err != nil {
				t.Fatalf("apply: %v", err)
			}
			got, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "app", metav1.GetOptions{})
			if err != nil || got.Data["cloud"] != string(p) {
				t.Fatalf("the API server has %v %v", got.Data, err)
			}

			_, err = env.Minter.StartCreate(ctx, acct, cfg, spec, uuid.NewString())
			refused(t, err, map[space.Provider]string{space.AWS: "Cluster already exists with name: " + name,
				space.GCP: "Already exists: projects/", space.Azure: "already exists in resource group"}[p])
			if n := env.Cloud.Created(p); n != 1 {
				t.Errorf("the cloud created %d clusters, want 1", n)
			}
		})
	}
}

func listed(list []space.DiscoveredCluster, name string) bool {
	for _, c := range list {
		if c.Name == name {
			return true
		}
	}
	return false
}

// refused checks a cloud refusal: 422-kind, CloudRefused, in the cloud's
// words.
func refused(t *testing.T, err error, words string) {
	t.Helper()
	var de *space.Error
	if !errors.As(err, &de) || de.Kind != space.KindInvalid || de.Reason != space.ReasonCloudRefused || !strings.Contains(de.Message, words) {
		t.Errorf("got %v, want CloudRefused saying %q", err, words)
	}
}

// TestCreateRefusals: each class of refusal answers CloudRefused with the
// cloud's own words, and the cloud creates nothing (EKS refuses node groups
// only once the control plane exists, as the real one does).
func TestCreateRefusals(t *testing.T) {
	env := minttest.StartWith(t, simcloud.Options{NodeQuota: 10})
	env.Cloud.SetCreationBackend(simcloud.Backend{Key: "unused", Server: "https://127.0.0.1:1"})
	minttest.AllowCreation(env.Cloud)

	type tc struct {
		name  string
		edit  func(*space.ClusterSpec)
		words string
	}
	cases := map[space.Provider][]tc{
		space.AWS: {
			{"version", func(s *space.ClusterSpec) { s.KubernetesVersion = "1.27" }, "unsupported Kubernetes version 1.27"},
			{"unknown subnet", func(s *space.ClusterSpec) { s.Network.SubnetIDs[1] = "subnet-404" }, "The subnet ID 'subnet-404' does not exist"},
			{"one zone", func(s *space.ClusterSpec) { s.Network.SubnetIDs = s.Network.SubnetIDs[:1] }, "at least two different AZs"},
			{"security group", func(s *space.ClusterSpec) { s.Network.SecurityGroupIDs = []string{"sg-404"} }, "The security group 'sg-404' does not exist"},
			{"foreign role", func(s *space.ClusterSpec) { s.ClusterRoleARN = "arn:aws:iam::999999999999:role/eks" }, "could not be assumed"},
		},
		space.GCP: {
			{"version", func(s *space.ClusterSpec) { s.KubernetesVersion = "1.27" }, `Master version "1.27" is unsupported.`},
			{"machine type", func(s *space.ClusterSpec) { s.NodePool.MachineType = "e2-huge" }, `Machine type "e2-huge" does not exist`},
			{"network", func(s *space.ClusterSpec) { s.Network.Network = "nope" }, `Network "nope" does not exist.`},
			{"subnetwork", func(s *space.ClusterSpec) { s.Network.Subnetwork = "other" }, "is not valid for Network"},
			{"quota", func(s *space.ClusterSpec) { s.NodePool.Max = 11 }, "Insufficient regional quota"},
		},
		space.Azure: {
			{"version", func(s *space.ClusterSpec) { s.KubernetesVersion = "1.27" }, "Version 1.27 is not supported in this region"},
			{"vm size", func(s *space.ClusterSpec) { s.NodePool.MachineType = "Standard_Huge" }, "The VM size of Standard_Huge is not allowed"},
			{"subnet", func(s *space.ClusterSpec) { s.Network.VNetSubnetID += "-404" }, "was not found"},
			{"quota", func(s *space.ClusterSpec) { s.NodePool.Max = 11 }, "exceeding approved Nodes quota"},
		},
	}
	// A name taken by a cluster the job did not create: one this identity
	// cannot even see on EKS and GKE; on AKS, whose roles are granted on
	// the resource group, one it can read.
	for _, p := range space.Providers {
		cl := minttest.Cluster(p, "taken", "https://127.0.0.1:1", nil)
		if p != space.Azure {
			cl.Principals = []string{"someone-else"}
		}
		env.Cloud.AddCluster(cl)
	}
	cases[space.AWS] = append(cases[space.AWS], tc{"name taken", nil, "Cluster already exists with name: taken"})
	cases[space.GCP] = append(cases[space.GCP], tc{"name taken", nil, "Already exists: projects/" + minttest.GCPProject})
	cases[space.Azure] = append(cases[space.Azure], tc{"name taken", nil, "already exists in resource group"})
	for p, list := range cases {
		for _, c := range list {
			t.Run(string(p)+"/"+c.name, func(t *testing.T) {
				spec, name := minttest.Spec(p), "refused"
				if c.edit != nil {
					c.edit(&spec)
				} else {
					name = "taken"
				}
				_, err := env.Minter.StartCreate(t.Context(), env.Accounts[p], minttest.Config(p, name), spec, uuid.NewString())
				refused(t, err, c.words)
				if n := env.Cloud.Created(p); n != 0 {
					t.Errorf("the cloud created %d clusters", n)
				}
			})
		}
	}

	// EKS checks the node group when it is created, after the control
	// plane: an unknown instance type or a node count over the quota fails
	// that step, and the cluster stays (as on AWS).
	for _, c := range []tc{
		{"instance type", func(s *space.ClusterSpec) { s.NodePool.MachineType = "x9.huge" }, "Instance type x9.huge is not supported"},
		{"quota", func(s *space.ClusterSpec) { s.NodePool.Max = 11 }, "Quota exceeded for nodes"},
	} {
		t.Run("aws/nodegroup "+c.name, func(t *testing.T) {
			spec, token, cfg := minttest.Spec(space.AWS), uuid.NewString(), minttest.Config(space.AWS, "ng-"+strings.ReplaceAll(c.name, " ", "-"))
			c.edit(&spec)
			acct := env.Accounts[space.AWS]
			p, err := env.Minter.StartCreate(t.Context(), acct, cfg, spec, token)
			if err != nil {
				t.Fatal(err)
			}
			p, err = env.Minter.Advance(t.Context(), acct, cfg, spec, token, p.Operation)
			refused(t, err, c.words)
			if p.Operation.Stage == eks.StageNodegroup {
				t.Errorf("a refused node group was stored as started: %+v", p)
			}
		})
	}
}

// TestCreateOnlyAsAllowedIdentity: an identity the customer trusts for
// reading (a ready account) but did not allow to create is refused by the
// cloud, and nothing is created.
func TestCreateOnlyAsAllowedIdentity(t *testing.T) {
	env := minttest.Start(t)
	env.Cloud.SetCreationBackend(simcloud.Backend{Key: "unused", Server: "https://127.0.0.1:1"})
	minttest.AllowCreation(env.Cloud)
	readers := map[space.Provider]map[string]string{
		space.AWS:   {"roleArn": "arn:aws:iam::" + minttest.AWSAccount + ":role/spaces-readonly"},
		space.GCP:   {"projectId": minttest.GCPProject, "serviceAccountEmail": "viewer@" + minttest.GCPProject + ".iam.gserviceaccount.com"},
		space.Azure: {"tenantId": minttest.TenantID, "clientId": "12121212-3434-5656-7878-909090909090", "subscriptionId": minttest.Subscription},
	}
	for _, p := range space.Providers {
		t.Run(string(p), func(t *testing.T) {
			a, err := env.Service.CreateAccount(t.Context(), env.Org, space.NewAccountInput{Provider: p, Name: "reader", Connection: readers[p]})
			if err != nil {
				t.Fatal(err)
			}
			if err := env.Cloud.ApplySetup(a); err != nil {
				t.Fatal(err)
			}
			if a, err = env.Service.VerifyAccount(t.Context(), env.Org, a.ID); err != nil || !a.Ready() {
				t.Fatalf("verify: %v %s", err, a.Status)
			}
			_, err = env.Minter.StartCreate(t.Context(), a, minttest.Config(p, "not-mine"), minttest.Spec(p), uuid.NewString())
			if reasonOf(err) != space.ReasonAccessDenied {
				t.Errorf("got %v, want AccessDenied", err)
			}
			if n := env.Cloud.Created(p); n != 0 {
				t.Errorf("the cloud created %d clusters", n)
			}
		})
	}
}

// TestCreateCloudUnavailable: a cloud answering 5xx to the creation is
// CloudUnavailable (a retry can succeed), not a refusal, and nothing is
// created.
func TestCreateCloudUnavailable(t *testing.T) {
	env := minttest.Start(t)
	env.Cloud.SetCreationBackend(simcloud.Backend{Key: "unused", Server: "https://127.0.0.1:1"})
	minttest.AllowCreation(env.Cloud)
	ops := map[space.Provider]string{space.AWS: "eks:CreateCluster", space.GCP: "gke:CreateCluster", space.Azure: "arm:managedClusters.createOrUpdate"}
	for _, p := range space.Providers {
		env.Cloud.Fail(ops[p], 503)
		_, err := env.Minter.StartCreate(t.Context(), env.Accounts[p], minttest.Config(p, "later"), minttest.Spec(p), uuid.NewString())
		if reasonOf(err) != space.ReasonCloudUnavailable {
			t.Errorf("%s: got %v, want CloudUnavailable", p, err)
		}
		if env.Cloud.Calls(ops[p]) == 0 || env.Cloud.Created(p) != 0 {
			t.Errorf("%s: %d calls, %d created", p, env.Cloud.Calls(ops[p]), env.Cloud.Created(p))
		}
	}
}
