package terraform

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	tfstate "github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"spaces/agent/install"
	"spaces/agent/manifests"
	"spaces/client"
	"spaces/infra/demo"
	"spaces/infra/local"
	"spaces/infra/testwait"
)

// startAgentStack is startAccStack with probing on (an agent space turns
// active when the prober reads its lease) and the demo's real API server,
// which the test needs: without it the test fails, naming the build.
func startAgentStack(t *testing.T) *accStack {
	t.Helper()
	prefix := fmt.Sprintf("tfa%d%d-", time.Now().UnixNano()%1e6, seq.Add(1))
	st, err := local.Start(context.Background(), local.Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names: func(id string) string { return prefix + id },
		Log:   slog.New(slog.DiscardHandler), Demo: &demo.Options{KubeDir: filepath.Join(t.TempDir(), "kube")},
		Probing: local.ProbingConfig{Interval: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if st.Demo.Real == nil {
		t.Fatalf("the demo has no real API server: %s", st.Demo.RealMissing)
	}
	token, err := st.Signer.Mint("org-"+uuid.NewString()[:8], "terraform", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	api, err := client.New(st.APIURL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return &accStack{st: st, token: token, api: api}
}

// writeKubeconfig is a kubeconfig whose context "private" is the demo's
// real API server, as its admin.
func writeKubeconfig(t *testing.T, s *accStack) string {
	t.Helper()
	kc := s.st.Demo.Real
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster: {server: %q, certificate-authority-data: %q}
users:
- name: admin
  user: {token: %q}
contexts:
- name: private
  context: {cluster: demo, user: admin}
current-context: ""
`, kc.URL, base64.StdEncoding.EncodeToString(kc.CAPEM), kc.AdminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterStandIns play, on the demo's real API server (which runs no
// kubelet and no controller-manager), the two parts of a cluster the
// install relies on: the kubelet, which starts the agent's pod each time
// the Deployment appears or changes (Demo.StartAgent, from what the
// cluster holds then), and the namespace controller, which finalizes a
// namespace being deleted once its content is gone. Until ctx ends.
func clusterStandIns(ctx context.Context, t *testing.T, d *demo.Demo, admin kubernetes.Interface) {
	var seen int64
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if dep, err := admin.AppsV1().Deployments(manifests.Namespace).Get(ctx, "spaces-agent", metav1.GetOptions{}); err == nil && dep.Generation != seen {
			seen = dep.Generation
			if err := d.StartAgent(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("the kubelet's stand-in cannot start the agent: %v", err)
			}
		}
		ns, err := admin.CoreV1().Namespaces().Get(ctx, manifests.Namespace, metav1.GetOptions{})
		if err != nil || ns.DeletionTimestamp == nil || len(ns.Spec.Finalizers) == 0 {
			continue
		}
		if l, err := admin.CoreV1().Secrets(manifests.Namespace).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
			continue
		}
		if l, err := admin.AppsV1().Deployments(manifests.Namespace).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) > 0 {
			continue
		}
		ns.Spec.Finalizers = nil
		_, _ = admin.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	}
}

// agentObjects are the objects the install applies, as the state's
// manifests name them.
func agentObjects(st *tfstate.State) ([]install.Object, string, error) {
	rs, ok := st.RootModule().Resources["spaces_space.private"]
	if !ok {
		return nil, "", errors.New("spaces_space.private is not in the state")
	}
	rendered := rs.Primary.Attributes["agent_install_manifests"]
	objs, err := manifests.Objects([]byte(rendered))
	if err != nil {
		return nil, "", fmt.Errorf("agent_install_manifests: %w", err)
	}
	var out []install.Object
	token := ""
	for _, o := range objs {
		out = append(out, install.Object{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()})
		if o.GetKind() == "Secret" && o.GetName() == "spaces-agent-bootstrap" {
			token, _, _ = unstructuredString(o.Object, "stringData", "token")
		}
	}
	if len(out) == 0 || token == "" {
		return nil, "", fmt.Errorf("agent_install_manifests holds %d objects and no bootstrap token", len(out))
	}
	return out, token, nil
}

func unstructuredString(m map[string]any, keys ...string) (string, bool, error) {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return "", false, nil
		}
		v = mm[k]
	}
	s, ok := v.(string)
	return s, ok, nil
}

// getObject reads one object of the install from the API server.
func getObject(ctx context.Context, kube kubernetes.Interface, o install.Object) error {
	var err error
	switch o.Kind {
	case "Namespace":
		_, err = kube.CoreV1().Namespaces().Get(ctx, o.Name, metav1.GetOptions{})
	case "Deployment":
		_, err = kube.AppsV1().Deployments(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	case "Secret":
		_, err = kube.CoreV1().Secrets(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	case "ServiceAccount":
		_, err = kube.CoreV1().ServiceAccounts(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	case "Role":
		_, err = kube.RbacV1().Roles(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	case "RoleBinding":
		_, err = kube.RbacV1().RoleBindings(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	case "ClusterRole":
		_, err = kube.RbacV1().ClusterRoles().Get(ctx, o.Name, metav1.GetOptions{})
	case "ClusterRoleBinding":
		_, err = kube.RbacV1().ClusterRoleBindings().Get(ctx, o.Name, metav1.GetOptions{})
	default:
		err = fmt.Errorf("no read for %s", o)
	}
	return err
}

// exchanged: the agent's state Secret records token as the bootstrap it
// exchanged.
func exchanged(ctx context.Context, admin kubernetes.Interface, token string) bool {
	sec, err := admin.CoreV1().Secrets(manifests.Namespace).Get(ctx, "spaces-agent-state", metav1.GetOptions{})
	sum := sha256.Sum256([]byte(token))
	return err == nil && len(sec.Data["credential"]) > 0 && string(sec.Data["bootstrap_sha256"]) == hex.EncodeToString(sum[:])
}

// sensitiveInPlan: the plan marks agent_install_manifests sensitive, so
// tofu prints it as (sensitive value), never the token.
type sensitiveInPlan struct{ addr string }

func (c sensitiveInPlan) CheckPlan(_ context.Context, req plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	for _, rc := range req.Plan.ResourceChanges {
		if rc.Address != c.addr {
			continue
		}
		after, _ := rc.Change.AfterSensitive.(map[string]any)
		if after["agent_install_manifests"] != true {
			resp.Error = fmt.Errorf("%s: agent_install_manifests is not sensitive in the plan (after_sensitive %v)", c.addr, rc.Change.AfterSensitive)
		}
		return
	}
	resp.Error = fmt.Errorf("%s is not in the plan", c.addr)
}

// TestAccAgentSpaceOneApply: from nothing to an active agent space in one
// tofu apply: the cloud account created, its trust applied in the
// simulated cloud (terraform_data's local-exec standing in for
// aws_iam_role), verified, the agent space registered with agent_install,
// its manifests applied by the provider to the demo's real API server
// through a kubeconfig context, the agent started there (the kubelet's
// stand-in, once the Deployment appears) and the apply returning with the
// space active (wait_for_active). The bootstrap token is in the sensitive
// agent_install_manifests only (sensitive in the plan) and is the one in
// the cluster's Secret. A second plan is empty. A new agent_image installs
// again in place: a new token, the Deployment updated, the same space,
// active again on the new token. Destroy deregisters the space and deletes
// every object the provider applied: none is left on the API server, and
// the org has no space.
func TestAccAgentSpaceOneApply(t *testing.T) {
	accEnv(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("the trust's stand-in (local-exec) needs curl: %v", err)
	}
	s := startAgentStack(t)
	kubeconfig := writeKubeconfig(t, s)
	admin := kubernetes.NewForConfigOrDie(s.st.Demo.Real.RESTConfig())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); clusterStandIns(ctx, t, s.st.Demo, admin) }()
	t.Cleanup(func() { stop(); <-done })

	const name = "spaces_space.private"
	config := func(image string) string {
		return s.providerBlock() + fmt.Sprintf(`
resource "spaces_cloud_account" "prod" {
  cloud               = "aws"
  name                = "prod"
  connection_settings = { roleArn = %[1]q }
}

# Stands in for aws_iam_role.spaces { assume_role_policy = spaces_cloud_account.prod.setup_trust_policy }:
# the simulated cloud's trust applied through the local stack's dev route.
resource "terraform_data" "trust" {
  input = { account = spaces_cloud_account.prod.id, policy = spaces_cloud_account.prod.setup_trust_policy }
  provisioner "local-exec" {
    command     = "%[2]s -fsS -X POST -H 'Content-Type: application/json' -H \"Authorization: Bearer $SPACES_TOKEN\" -d '{\"account_id\":\"${self.input.account}\"}' $SETUP_URL"
    environment = { SPACES_TOKEN = %[3]q, SETUP_URL = %[4]q }
  }
}

resource "spaces_cloud_account_verification" "prod" {
  cloud_account_id = spaces_cloud_account.prod.id
  depends_on       = [terraform_data.trust]
}

resource "spaces_space" "private" {
  cloud_account_id = spaces_cloud_account_verification.prod.cloud_account_id
  cloud            = "aws"
  config           = { region = %[5]q, clusterName = "demo-eks-apps" }
  connectivity     = "agent"
  agent_image      = %[6]q
  agent_url        = %[7]q
  agent_install    = { kubeconfig = %[8]q, context = "private" }
  wait_for_active  = true
  timeouts {
    create = "3m"
  }
}
`, demo.RoleARN, curl, s.token, s.st.APIURL+local.DevApplySetupPath, demo.AWSRegion, image, s.st.AgentURL, kubeconfig)
	}
	var id, firstToken string
	active := func(st *tfstate.State) error {
		got, err := stateID(st, name)
		if err != nil {
			return err
		}
		res, err := client.Result(s.api.GetSpaceWithResponse(ctx, got, nil))
		if err != nil {
			return err
		}
		if res.JSON200.Status != client.StatusActive {
			return fmt.Errorf("the API's space is %s", res.JSON200.Status)
		}
		return nil
	}
	installed := func(image string, token *string) resource.TestCheckFunc {
		return func(st *tfstate.State) error {
			objs, tok, err := agentObjects(st)
			if err != nil {
				return err
			}
			for _, o := range objs {
				if err := getObject(ctx, admin, o); err != nil {
					return fmt.Errorf("%s on the API server: %v", o, err)
				}
			}
			sec, err := admin.CoreV1().Secrets(manifests.Namespace).Get(ctx, "spaces-agent-bootstrap", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if string(sec.Data["token"]) != tok || !strings.HasPrefix(tok, "spb1.") {
				return errors.New("the cluster's bootstrap Secret does not hold the state's token")
			}
			dep, err := admin.AppsV1().Deployments(manifests.Namespace).Get(ctx, "spaces-agent", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if img := dep.Spec.Template.Spec.Containers[0].Image; img != image {
				return fmt.Errorf("the Deployment runs %s, want %s", img, image)
			}
			*token = tok
			return nil
		}
	}
	var secondToken string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config: config("spaces-agent:demo"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(name, plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction("spaces_cloud_account.prod", plancheck.ResourceActionCreate),
					sensitiveInPlan{name},
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(name, "status", "active"),
					resource.TestCheckResourceAttr(name, "connectivity", "agent"),
					resource.TestCheckResourceAttr("spaces_cloud_account_verification.prod", "status", "ready"),
					active,
					installed("spaces-agent:demo", &firstToken),
					func(st *tfstate.State) (err error) { id, err = stateID(st, name); return err },
				),
			},
			{
				Config: config("spaces-agent:demo"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
			{
				// A new image: installed again in place with a new
				// bootstrap, which the restarted agent exchanges.
				Config: config("spaces-agent:demo2"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(name, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(name, tfjsonpath.New("agent_install_manifests")),
					sensitiveInPlan{name},
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPtr(name, "id", &id),
					installed("spaces-agent:demo2", &secondToken),
					func(*tfstate.State) error {
						if secondToken == firstToken {
							return errors.New("the reinstall kept the first bootstrap token")
						}
						return nil
					},
					func(st *tfstate.State) error {
						// The agent exchanged the new bootstrap and renews
						// its lease on it: the space stays active.
						return testwait.Until(time.Minute, func() bool {
							res, err := client.Result(s.api.GetSpaceWithResponse(ctx, id, nil))
							return err == nil && res.JSON200.Status == client.StatusActive && exchanged(ctx, admin, secondToken)
						})
					},
				),
			},
		},
		CheckDestroy: func(st *tfstate.State) error {
			if _, err := client.Result(s.api.GetSpaceWithResponse(ctx, id, nil)); !errors.Is(err, client.ErrNotFound) {
				return fmt.Errorf("after destroy the space answers %v, want 404", err)
			}
			if ids := s.spaceIDs(t); len(ids) != 0 {
				return fmt.Errorf("after destroy the org still has spaces %v", ids)
			}
			rendered, err := manifests.Render(manifests.Values{Image: "x", AgentURL: "x", BootstrapToken: "x", BootstrapExpires: time.Now()})
			if err != nil {
				return err
			}
			objs, err := manifests.Objects(rendered)
			if err != nil {
				return err
			}
			// Every object is deleted by the provider; the namespace once
			// its controller's stand-in finalized it.
			var left []string
			if err := testwait.Until(time.Minute, func() bool {
				left = nil
				for _, o := range objs {
					obj := install.Object{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
					if !apierrors.IsNotFound(getObject(ctx, admin, obj)) {
						left = append(left, obj.String())
					}
				}
				return len(left) == 0
			}); err != nil {
				return fmt.Errorf("after destroy the API server still has %v (%v)", left, err)
			}
			return nil
		},
	})
}

// TestAccSpaceAgentSettingsRefused: agent settings that cannot work are
// refused with a clear error and register nothing: agent_image on a direct
// space, agent_install without the image and URL it renders with, a
// timeouts.create that is not a duration (at plan), and agent_install naming
// a context its kubeconfig lacks (at apply, before the space is
// registered). The org has no space after any of them (each next step
// checks first). Then wait_for_active on an agent space nobody installs
// fails the apply after timeouts.create and leaves the space tainted: the
// next plan replaces it.
func TestAccSpaceAgentSettingsRefused(t *testing.T) {
	accEnv(t)
	s := startAccStack(t)
	s.account = s.connectAWS(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: private\n  context: {cluster: c, user: u}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := func(extra string) string {
		return s.providerBlock() + fmt.Sprintf(`
resource "spaces_space" "x" {
  cloud_account_id = %q
  cloud            = "aws"
  config           = { region = %q, clusterName = "demo-eks-1" }
%s
}
`, s.account, demo.AWSRegion, extra)
	}
	none := func(*tfstate.State) error {
		if ids := s.spaceIDs(t); len(ids) != 0 {
			return fmt.Errorf("the org has spaces %v", ids)
		}
		return nil
	}
	step := func(extra, want string) resource.TestStep {
		return resource.TestStep{Config: config(extra), ExpectError: regexp.MustCompile(want),
			PreConfig: func() {
				if err := none(nil); err != nil {
					t.Fatal(err)
				}
			}}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			step(`agent_image = "spaces-agent:1"`, `Only for agent spaces`),
			step(`connectivity = "agent"
  agent_install = { kubeconfig = "`+kubeconfig+`", context = "private" }`, `Missing agent_image`),
			step(`connectivity = "agent"
  agent_image   = "spaces-agent:1"
  agent_url     = "http://127.0.0.1:1"
  agent_install = { kubeconfig = "`+kubeconfig+`", context = "nowhere" }`, `context "nowhere"`),
			step(`timeouts {
    create = "soon"
  }`, `Invalid Attribute Value Time Duration`),
			{
				// An agent space nobody installs is not active within
				// timeouts.create: the apply fails, the space kept in the
				// state, tainted ...
				Config: config(`connectivity = "agent"
  wait_for_active = true
  timeouts {
    create = "3s"
  }`),
				ExpectError: regexp.MustCompile(`did not turn active`),
			},
			{
				// ... so the next apply replaces it.
				Config: config(`connectivity = "agent"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("spaces_space.x", plancheck.ResourceActionDestroyBeforeCreate),
				}},
			},
		},
		CheckDestroy: none,
	})
}
