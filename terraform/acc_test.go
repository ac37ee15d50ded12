package terraform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	tfstate "github.com/hashicorp/terraform-plugin-testing/terraform"

	"spaces/client"
	"spaces/infra/demo"
	"spaces/infra/local"
	"spaces/infra/testwait"
)

// TofuVersion is the OpenTofu release the acceptance tests run: the one
// infra/tofu/build.sh pins (TestTofuVersionMatchesBuildScript).
const TofuVersion = "v1.12.6"

// tofuBuildCommand builds the binary once into the cache.
const tofuBuildCommand = "make tofu   (or: bash infra/tofu/build.sh)"

// The version the tests expect is the one the build script builds.
func TestTofuVersionMatchesBuildScript(t *testing.T) {
	script, err := os.ReadFile("../infra/tofu/build.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^tofu_version="(v[^"]+)"$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("infra/tofu/build.sh: no tofu_version line")
	}
	if string(m[1]) != TofuVersion {
		t.Errorf("infra/tofu/build.sh builds %s, the tests expect %s", m[1], TofuVersion)
	}
}

// tofuPath is the tofu binary infra/tofu/build.sh built: $SPACES_TOFU if
// set, else ${SPACES_CACHE_DIR:-$HOME/.cache/spaces}/tofu/<version>/tofu.
// A missing or other binary fails the test with the command that builds
// it: never a skip, and never terraform-plugin-testing's own download
// (no network here).
func tofuPath(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("SPACES_TOFU")
	if bin == "" {
		root := os.Getenv("SPACES_CACHE_DIR")
		if root == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				t.Fatal(err)
			}
			root = filepath.Join(home, ".cache", "spaces")
		}
		bin = filepath.Join(root, "tofu", TofuVersion, "tofu")
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("OpenTofu "+TofuVersion+"\n")) {
		t.Fatalf("no tofu %s at %s (%v: %s).\nBuild it once (cached outside the repository):\n\t%s\nor point SPACES_TOFU at one",
			TofuVersion, bin, err, strings.TrimSpace(string(out)), tofuBuildCommand)
	}
	return bin
}

// accEnv makes terraform-plugin-testing run this test with the built tofu
// and nothing of the machine's: TF_ACC set here so the test always runs,
// OpenTofu's provider address for the in-process provider (it reattaches
// to registry.opentofu.org/hashicorp/spaces, the address tofu gives a
// provider named spaces), an empty CLI configuration, no checkpoint. The
// same for every test, set once, so that the tests run in parallel (each
// calls accEnv before t.Parallel).
func accEnv(t *testing.T) {
	t.Helper()
	bin := tofuPath(t)
	accEnvOnce.Do(func() {
		for k, v := range map[string]string{
			"TF_ACC": "1", "TF_ACC_TERRAFORM_PATH": bin, "TF_ACC_TERRAFORM_VERSION": "",
			"TF_ACC_PROVIDER_HOST": "registry.opentofu.org", "TF_ACC_PROVIDER_NAMESPACE": "hashicorp",
			"TF_CLI_CONFIG_FILE": os.DevNull, "CHECKPOINT_DISABLE": "1",
			"SPACES_SERVER": "", "SPACES_TOKEN": "",
		} {
			if err := os.Setenv(k, v); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Parallel()
}

var accEnvOnce sync.Once

// providers serves the provider in-process, as the tests' tofu reaches it.
var providers = map[string]func() (tfprotov6.ProviderServer, error){
	"spaces": providerserver.NewProtocol6WithError(New("test")()),
}

// accStack is a local stack with the demo's simulated clouds, an org of
// its own and a token of it; account is a connected AWS account of the
// demo once connectAWS made one.
type accStack struct {
	st      *local.Stack
	token   string
	api     *client.API
	account string
}

func startAccStack(t *testing.T) *accStack {
	t.Helper()
	ctx := context.Background()
	prefix := fmt.Sprintf("tf%d%d-", time.Now().UnixNano()%1e6, seq.Add(1))
	st, err := local.Start(ctx, local.Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names: func(id string) string { return prefix + id },
		Log:   slog.New(slog.DiscardHandler), Demo: &demo.Options{},
		Probing: local.ProbingConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	org := "org-" + uuid.NewString()[:8]
	token, err := st.Signer.Mint(org, "terraform", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	api, err := client.New(st.APIURL, client.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return &accStack{st: st, token: token, api: api}
}

// connectAWS connects a demo AWS account: created, its setup applied in
// the simulated cloud (the local stack's dev route), verified.
func (s *accStack) connectAWS(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	acct, err := client.Result(s.api.CreateCloudAccountWithBodyWithResponse(ctx, nil, "application/json",
		strings.NewReader(`{"provider":"aws","name":"prod","connection":{"roleArn":"`+demo.RoleARN+`"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	id := acct.JSON201.Id.String()
	s.applySetup(t, id)
	if _, err := client.Result(s.api.VerifyCloudAccountWithResponse(ctx, id, nil)); err != nil {
		t.Fatal(err)
	}
	return id
}

// applySetup does in the simulated cloud what the account's setup asks
// (the trust policy), as the customer would.
func (s *accStack) applySetup(t *testing.T, accountID string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"account_id": accountID})
	req, _ := http.NewRequest("POST", s.st.APIURL+local.DevApplySetupPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("apply setup: %s", res.Status)
	}
}

// providerBlock configures the provider for the stack.
func (s *accStack) providerBlock() string {
	return fmt.Sprintf("provider \"spaces\" {\n  server = %q\n  token  = %q\n}\n", s.st.APIURL, s.token)
}

// spaceIDs are the ids of the org's registered spaces, through the API.
func (s *accStack) spaceIDs(t *testing.T) []string {
	t.Helper()
	res, err := client.Result(s.api.ListSpacesWithResponse(context.Background(), &client.ListSpacesParams{}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sp := range res.JSON200.Items {
		ids = append(ids, sp.Id.String())
	}
	return ids
}

// stateID is the id of a resource in the state.
func stateID(st *tfstate.State, name string) (string, error) {
	rs, ok := st.RootModule().Resources[name]
	if !ok {
		return "", fmt.Errorf("%s is not in the state", name)
	}
	return rs.Primary.ID, nil
}

// TestAccSpace drives spaces_space through a real tofu against the local
// stack: create in the same apply as the resource whose outputs name the
// cluster (the API has the space), a second plan with no change,
// labels changed in place (spaces_spaces finding the space by one, and
// spaces_clusters listing its cluster as registered to it),
// import by id matching the state, a space deregistered out of band
// planned for re-creation (a new space registered), and destroy leaving
// the org with no space.
func TestAccSpace(t *testing.T) {
	accEnv(t)
	s := startAccStack(t)
	s.account = s.connectAWS(t)
	ctx := context.Background()
	const name = "spaces_space.eks"
	config := func(labels string) string {
		// terraform_data (built into tofu) stands in for aws_eks_cluster:
		// the cluster's name and region are another resource's outputs,
		// known only once it is applied, as they are in a configuration
		// that creates the cluster (no AWS provider here).
		return s.providerBlock() + fmt.Sprintf(`
resource "terraform_data" "cluster" {
  input = { name = "demo-eks-1", region = %q }
}

resource "spaces_space" "eks" {
  cloud_account_id = %q
  cloud            = "aws"
  config           = { region = terraform_data.cluster.output.region, clusterName = terraform_data.cluster.output.name }
  labels           = %s
}
`, demo.AWSRegion, s.account, labels)
	}
	withData := func(labels string) string {
		return config(labels) + `
data "spaces_spaces" "platform" {
  label_selector = "team=platform"
  depends_on     = [spaces_space.eks]
}

data "spaces_clusters" "eu" {
  cloud_account_id = spaces_space.eks.cloud_account_id
  region           = spaces_space.eks.config.region
  depends_on       = [spaces_space.eks]
}
`
	}
	var first string
	apiHas := func(labels map[string]string) resource.TestCheckFunc {
		return func(st *tfstate.State) error {
			id, err := stateID(st, name)
			if err != nil {
				return err
			}
			res, err := client.Result(s.api.GetSpaceWithResponse(ctx, id, nil))
			if err != nil {
				return fmt.Errorf("the API on %s: %w", id, err)
			}
			if got := res.JSON200.Labels; got == nil || fmt.Sprint(map[string]string(*got)) != fmt.Sprint(labels) {
				return fmt.Errorf("the API's labels %v, want %v", got, labels)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config: config(`{ env = "dev" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(name, plancheck.ResourceActionCreate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(name, "name", "demo-eks-1"),
					resource.TestCheckResourceAttr(name, "connectivity", "direct"),
					resource.TestCheckResourceAttr(name, "synthetic", "false"),
					resource.TestCheckResourceAttr(name, "labels.env", "dev"),
					resource.TestCheckResourceAttrSet(name, "status"),
					apiHas(map[string]string{"env": "dev"}),
					func(st *tfstate.State) (err error) { first, err = stateID(st, name); return err },
				),
			},
			{
				// A second plan of the same configuration changes nothing.
				Config: config(`{ env = "dev" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
			{
				Config: withData(`{ env = "prod", team = "platform" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(name, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPtr(name, "id", &first),
					apiHas(map[string]string{"env": "prod", "team": "platform"}),
					resource.TestCheckResourceAttr("data.spaces_spaces.platform", "spaces.#", "1"),
					resource.TestCheckResourceAttrPair("data.spaces_spaces.platform", "spaces.0.id", name, "id"),
					// The account's clusters: demo-eks-1 with the config
					// that registers it, held by the resource's space.
					resource.TestCheckTypeSetElemNestedAttrs("data.spaces_clusters.eu", "clusters.*", map[string]string{
						"name": "demo-eks-1", "location": demo.AWSRegion, "config.clusterName": "demo-eks-1", "config.region": demo.AWSRegion,
					}),
					resource.TestCheckTypeSetElemAttrPair("data.spaces_clusters.eu", "clusters.*.registered_space_id", name, "id"),
				),
			},
			{
				// Import by id: what tofu reads back equals the state.
				ResourceName: name, ImportState: true, ImportStateVerify: true,
			},
			{
				// Deregistered out of band: the refresh finds it gone and
				// the plan registers it again.
				PreConfig: func() {
					if _, err := client.Result(s.api.DeregisterSpaceWithResponse(ctx, first, nil)); err != nil {
						t.Fatal(err)
					}
				},
				Config: config(`{ env = "prod", team = "platform" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(name, plancheck.ResourceActionCreate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					func(st *tfstate.State) error {
						id, err := stateID(st, name)
						if err != nil {
							return err
						}
						if id == first {
							return fmt.Errorf("re-created with the deregistered space's id %s", id)
						}
						if _, err := client.Result(s.api.GetSpaceWithResponse(ctx, first, nil)); !errors.Is(err, client.ErrNotFound) {
							return fmt.Errorf("the deregistered space answers %v, want 404", err)
						}
						return nil
					},
					apiHas(map[string]string{"env": "prod", "team": "platform"}),
				),
			},
		},
		// Destroy leaves nothing: every space of the state answers 404 and
		// the org has no space.
		CheckDestroy: func(st *tfstate.State) error {
			for _, rs := range st.RootModule().Resources {
				if rs.Type != "spaces_space" {
					continue
				}
				if _, err := client.Result(s.api.GetSpaceWithResponse(ctx, rs.Primary.ID, nil)); !errors.Is(err, client.ErrNotFound) {
					return fmt.Errorf("after destroy %s answers %v, want 404", rs.Primary.ID, err)
				}
			}
			if ids := s.spaceIDs(t); len(ids) != 0 {
				return fmt.Errorf("after destroy the org still has spaces %v", ids)
			}
			return nil
		},
	})
}

// TestAccEnvironment drives spaces_environment and the spaces_space data
// source through tofu: an environment created on one space, a second plan
// with no change, rebound in place to another space, imported by id; its
// space deregistered out of band and gated by the cascade, then one apply
// registers the space again and rebinds the environment to it in place
// (the gate lifted); destroy deregisters the spaces and, as the API has no
// delete for environments, leaves the environment (gated) in Spaces.
func TestAccEnvironment(t *testing.T) {
	accEnv(t)
	s := startAccStack(t)
	s.account = s.connectAWS(t)
	ctx := context.Background()
	const env = "spaces_environment.web"
	config := func(bound string) string {
		return s.providerBlock() + fmt.Sprintf(`
resource "spaces_space" "one" {
  cloud_account_id = %[1]q
  cloud            = "aws"
  config           = { region = %[2]q, clusterName = "demo-eks-1" }
}

resource "spaces_space" "two" {
  cloud_account_id = %[1]q
  cloud            = "aws"
  config           = { region = %[2]q, clusterName = "demo-eks-2" }
  labels           = { tier = "web" }
}

resource "spaces_environment" "web" {
  name     = "web-prod"
  space_id = spaces_space.%[3]s.id
}

data "spaces_space" "bound" {
  id = spaces_environment.web.space_id
}
`, s.account, demo.AWSRegion, bound)
	}
	apiEnv := func(st *tfstate.State) (*client.Environment, error) {
		id, err := stateID(st, env)
		if err != nil {
			return nil, err
		}
		res, err := client.Result(s.api.GetEnvironmentWithResponse(ctx, id, nil))
		if err != nil {
			return nil, err
		}
		return res.JSON200, nil
	}
	boundTo := func(space string) resource.TestCheckFunc {
		return func(st *tfstate.State) error {
			e, err := apiEnv(st)
			if err != nil {
				return err
			}
			want, err := stateID(st, space)
			if err != nil {
				return err
			}
			if e.SpaceId.String() != want || e.Gate != nil {
				return fmt.Errorf("the API's environment is bound to %s (gate %v), want %s ungated", e.SpaceId, e.Gate, want)
			}
			return nil
		}
	}
	var envID, two string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config: config("one"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(env, "namespace", "web-prod"),
					resource.TestCheckNoResourceAttr(env, "gate_reason"),
					resource.TestCheckResourceAttrPair(env, "space_id", "spaces_space.one", "id"),
					boundTo("spaces_space.one"),
					resource.TestCheckResourceAttr("data.spaces_space.bound", "name", "demo-eks-1"),
					resource.TestCheckResourceAttr("data.spaces_space.bound", "cloud", "aws"),
					resource.TestCheckResourceAttr("data.spaces_space.bound", "config.clusterName", "demo-eks-1"),
					func(st *tfstate.State) (err error) { envID, err = stateID(st, env); return err },
				),
			},
			{
				Config: config("one"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
			{
				// A new space_id rebinds in place: same environment.
				Config: config("two"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(env, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPtr(env, "id", &envID),
					boundTo("spaces_space.two"),
					resource.TestCheckResourceAttr("data.spaces_space.bound", "name", "demo-eks-2"),
					resource.TestCheckResourceAttr("data.spaces_space.bound", "labels.tier", "web"),
					func(st *tfstate.State) (err error) { two, err = stateID(st, "spaces_space.two"); return err },
				),
			},
			{
				ResourceName: env, ImportState: true, ImportStateVerify: true,
			},
			{
				// Its space deregistered out of band; once the cascade
				// has gated the environment, one apply registers the
				// space again and rebinds the environment to it.
				PreConfig: func() {
					if _, err := client.Result(s.api.DeregisterSpaceWithResponse(ctx, two, nil)); err != nil {
						t.Fatal(err)
					}
					testwait.Eventually(t, time.Minute, "the environment gated by the cascade", func() bool {
						res, err := client.Result(s.api.GetEnvironmentWithResponse(ctx, envID, nil))
						return err == nil && res.JSON200.Gate != nil
					})
				},
				Config: config("two"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("spaces_space.two", plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction(env, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPtr(env, "id", &envID),
					resource.TestCheckNoResourceAttr(env, "gate_reason"),
					boundTo("spaces_space.two"),
					func(st *tfstate.State) error {
						if id, _ := stateID(st, "spaces_space.two"); id == two {
							return fmt.Errorf("spaces_space.two kept the deregistered id %s", two)
						}
						return nil
					},
				),
			},
		},
		// Destroy: the spaces are deregistered; the environment stays in
		// Spaces (no delete route), gated by its space's deregistration.
		CheckDestroy: func(*tfstate.State) error {
			if ids := s.spaceIDs(t); len(ids) != 0 {
				return fmt.Errorf("after destroy the org still has spaces %v", ids)
			}
			return testwait.Until(time.Minute, func() bool {
				res, err := client.Result(s.api.GetEnvironmentWithResponse(ctx, envID, nil))
				return err == nil && res.JSON200.Gate != nil
			})
		},
	})
}

// TestAccCloudAccount drives spaces_cloud_account and
// spaces_cloud_account_verification through tofu: the account created
// pending, its setup exported (the AWS trust policy names the principal
// and requires the external id); a verification before the customer's side
// is applied fails with the cloud's reason; once the trust is applied in
// the simulated cloud, the verification makes the account ready (and a
// refresh reads it so); import by id; destroy removes the account.
func TestAccCloudAccount(t *testing.T) {
	accEnv(t)
	s := startAccStack(t)
	ctx := context.Background()
	const acct = "spaces_cloud_account.prod"
	config := func(verify bool) string {
		c := s.providerBlock() + fmt.Sprintf(`
resource "spaces_cloud_account" "prod" {
  cloud               = "aws"
  name                = "prod"
  connection_settings = { roleArn = %q }
}
`, demo.RoleARN)
		if verify {
			c += `
resource "spaces_cloud_account_verification" "prod" {
  cloud_account_id = spaces_cloud_account.prod.id
}
`
		}
		return c
	}
	var id string
	apiStatus := func(want string) resource.TestCheckFunc {
		return func(*tfstate.State) error {
			res, err := client.Result(s.api.GetCloudAccountWithResponse(ctx, id, nil))
			if err != nil {
				return err
			}
			if string(res.JSON200.Status) != want {
				return fmt.Errorf("the API's account is %s, want %s", res.JSON200.Status, want)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config: config(false),
				Check: resource.ComposeAggregateTestCheckFunc(
					func(st *tfstate.State) (err error) { id, err = stateID(st, acct); return err },
					resource.TestCheckResourceAttr(acct, "status", "pending"),
					resource.TestCheckResourceAttr(acct, "connection_settings.roleArn", demo.RoleARN),
					resource.TestCheckResourceAttrSet(acct, "setup_principal"),
					resource.TestCheckResourceAttrSet(acct, "setup_external_id"),
					func(st *tfstate.State) error {
						a := st.RootModule().Resources[acct].Primary.Attributes
						var policy map[string]any
						if err := json.Unmarshal([]byte(a["setup_trust_policy"]), &policy); err != nil {
							return fmt.Errorf("setup_trust_policy is not JSON: %v", err)
						}
						doc := a["setup_trust_policy"]
						if !strings.Contains(doc, a["setup_external_id"]) || !strings.Contains(doc, a["setup_principal"]) || !strings.Contains(doc, "sts:ExternalId") {
							return fmt.Errorf("the trust policy %s lacks the principal %s or the external id %s", doc, a["setup_principal"], a["setup_external_id"])
						}
						return nil
					},
					apiStatus("pending"),
				),
			},
			{
				// The customer's side is not applied yet: refused.
				Config:      config(true),
				ExpectError: regexp.MustCompile(`not verified`),
			},
			{
				PreConfig: func() { s.applySetup(t, id) },
				Config:    config(true),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("spaces_cloud_account_verification.prod", plancheck.ResourceActionCreate),
					plancheck.ExpectResourceAction(acct, plancheck.ResourceActionNoop),
				}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("spaces_cloud_account_verification.prod", "status", "ready"),
					apiStatus("ready"),
				),
			},
			{
				// The verification changed the account: a refresh reads
				// it ready (status is as last read).
				RefreshState: true,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(acct, "status", "ready"),
					resource.TestCheckNoResourceAttr(acct, "status_reason"),
				),
			},
			{
				ResourceName: acct, ImportState: true, ImportStateVerify: true,
			},
		},
		CheckDestroy: func(*tfstate.State) error {
			if _, err := client.Result(s.api.GetCloudAccountWithResponse(ctx, id, nil)); !errors.Is(err, client.ErrNotFound) {
				return fmt.Errorf("after destroy the account answers %v, want 404", err)
			}
			return nil
		},
	})
}
