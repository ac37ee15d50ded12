package terraform

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/terraform-plugin-framework/path"
	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	tfstate "github.com/hashicorp/terraform-plugin-testing/terraform"

	"spaces/client"
	"spaces/infra/demo"
	"spaces/infra/local"
	"spaces/infra/testwait"
)

// startJobStack is startAccStack with what provisioning jobs need: the
// demo's cloud creating clusters at once, the provisioner polling every
// second, and the prober on (a job's space is probed when registered).
func startJobStack(t *testing.T) *accStack {
	t.Helper()
	prefix := fmt.Sprintf("tj%d%d-", time.Now().UnixNano()%1e6, seq.Add(1))
	st, err := local.Start(context.Background(), local.Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names:        func(id string) string { return prefix + id },
		Log:          slog.New(slog.DiscardHandler),
		Demo:         &demo.Options{CreateDelay: time.Second},
		Probing:      local.ProbingConfig{Interval: 2 * time.Second},
		Provisioning: local.ProvisioningConfig{PollInterval: time.Second, Wait: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
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

// jobs are the org's provisioning jobs by id, through the API.
func (s *accStack) jobs(t *testing.T) map[string]client.ProvisioningJob {
	t.Helper()
	res, err := client.Result(s.api.ListProvisioningJobsWithResponse(context.Background(), &client.ListProvisioningJobsParams{}))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]client.ProvisioningJob{}
	for _, j := range res.JSON200.Items {
		out[j.Id.String()] = j
	}
	return out
}

// deleteJob calls the resource's Delete on a state holding only the job's
// id, as destroy does, and answers its diagnostics (the test sees what
// tofu only prints).
func (s *accStack) deleteJob(ctx context.Context, id string) (fwresource.DeleteResponse, error) {
	r := &jobResource{api: s.api, poll: 100 * time.Millisecond, maxPoll: time.Second}
	var sch fwresource.SchemaResponse
	r.Schema(ctx, fwresource.SchemaRequest{}, &sch)
	state := tfsdk.State{Schema: sch.Schema, Raw: tftypes.NewValue(sch.Schema.Type().TerraformType(ctx), nil)}
	var resp fwresource.DeleteResponse
	if d := state.SetAttribute(ctx, path.Root("id"), id); d.HasError() {
		return resp, fmt.Errorf("state: %v", d)
	}
	resp.State = state
	r.Delete(ctx, fwresource.DeleteRequest{State: state}, &resp)
	return resp, nil
}

// TestAccProvisioningJob drives spaces_provisioning_job through tofu
// against the local stack, whose demo cloud creates EKS clusters: the job
// created, waited for and succeeded, its space_id a registered space that
// turns active; a second plan with no change; import by id (an unknown id
// reads as gone). A job the
// cloud refuses (a Kubernetes version it does not offer) fails the apply
// with the API's reason and the cloud's words and stays in the state
// tainted: the next plan replaces it (the failed job canceled, a new one
// started, which fails alike), and removing it from the configuration
// cancels that one. A job whose create timeout passes first (the cloud
// answering 503 meanwhile) fails the apply, is kept tainted and is
// canceled by its destroy; with the cloud back, a new job for the same
// cluster succeeds. Destroy of the succeeded jobs forgets them and keeps
// their spaces registered.
func TestAccProvisioningJob(t *testing.T) {
	accEnv(t)
	s := startJobStack(t)
	s.account = s.connectAWS(t)
	ctx := context.Background()
	const (
		ok  = "spaces_provisioning_job.eks"
		bad = "spaces_provisioning_job.old"
	)
	job := func(name, cluster, version, create string) string {
		return fmt.Sprintf(`
resource "spaces_provisioning_job" %[1]q {
  cloud_account_id = %[2]q
  cloud            = "aws"
  config           = { region = %[3]q, clusterName = %[4]q }
  spec = {
    kubernetes_version = %[5]q
    node_pool          = { machine_type = "t3.large", min_nodes = 1, max_nodes = 3, desired_nodes = 2 }
    network            = { subnet_ids = [%[6]q, %[7]q], security_group_ids = [%[8]q] }
    tags               = { team = "platform" }
  }
  timeouts {
    create = %[9]q
  }
}
`, name, s.account, demo.AWSRegion, cluster, version, demo.AWSSubnetA, demo.AWSSubnetB, demo.AWSSecurityGroup, create)
	}
	good := s.providerBlock() + job("eks", "tf-job-1", "1.31", "5m")
	withBad := good + job("old", "tf-job-old", "1.19", "5m")
	// A create timeout of 0s has passed before the first read: the job
	// cannot have ended, whatever the machine's speed.
	withSlow := func(create string) string { return good + job("slow", "tf-job-2", "1.31", create) }
	var jobID, spaceID, firstBad, firstSlow string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config: good,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(ok, "status", "succeeded"),
					resource.TestCheckResourceAttr(ok, "name", "tf-job-1"),
					resource.TestCheckResourceAttrSet(ok, "space_id"),
					resource.TestCheckNoResourceAttr(ok, "failure_reason"),
					resource.TestCheckResourceAttr(ok, "spec.network.subnet_ids.#", "2"),
					func(st *tfstate.State) error {
						a := st.RootModule().Resources[ok].Primary.Attributes
						jobID, spaceID = a["id"], a["space_id"]
						j, err := client.Result(s.api.GetProvisioningJobWithResponse(ctx, jobID, nil))
						if err != nil {
							return err
						}
						if j.JSON200.State != client.ProvisioningJobStateSucceeded || j.JSON200.SpaceId == nil || j.JSON200.SpaceId.String() != spaceID {
							return fmt.Errorf("the API's job is %s with space %v, want succeeded with %s", j.JSON200.State, j.JSON200.SpaceId, spaceID)
						}
						// The space is registered, and the probe Spaces
						// starts at registration makes it active.
						var status client.Status
						err = testwait.Until(time.Minute, func() bool {
							sp, err := client.Result(s.api.GetSpaceWithResponse(ctx, spaceID, nil))
							if err == nil {
								status = sp.JSON200.Status
							}
							return err == nil && sp.JSON200.Name == "tf-job-1" && status == client.StatusActive
						})
						if err != nil {
							return fmt.Errorf("the job's space %s is %q, want tf-job-1 active: %w", spaceID, status, err)
						}
						return nil
					},
					// Destroying a succeeded job warns that its space is
					// kept, and keeps it (the job too: no route deletes one).
					func(*tfstate.State) error {
						resp, err := s.deleteJob(ctx, jobID)
						if err != nil {
							return err
						}
						d := resp.Diagnostics
						if d.HasError() || d.WarningsCount() != 1 || !strings.Contains(d.Warnings()[0].Detail(), "does not deregister its space "+spaceID) {
							return fmt.Errorf("destroying the succeeded job: %v, want one warning naming its kept space %s", d, spaceID)
						}
						j, err := client.Result(s.api.GetProvisioningJobWithResponse(ctx, jobID, nil))
						if err != nil || j.JSON200.State != client.ProvisioningJobStateSucceeded {
							return fmt.Errorf("after its delete the job answers %v, want succeeded", err)
						}
						if _, err := client.Result(s.api.GetSpaceWithResponse(ctx, spaceID, nil)); err != nil {
							return fmt.Errorf("after the job's delete its space answers %v", err)
						}
						return nil
					},
				),
			},
			{
				// A second plan of the same configuration changes nothing.
				Config: good,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
			{
				// Import by id reads back the state (timeouts are the
				// configuration's, not the API's).
				ResourceName: ok, ImportState: true, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				// An id the API does not know reads as gone.
				ResourceName: ok, ImportState: true, ImportStateId: uuid.NewString(),
				ExpectError: regexp.MustCompile(`Cannot import non-existent remote object`),
			},
			{
				// The cloud refuses the version: the apply fails with the
				// API's reason and the cloud's words.
				Config:      withBad,
				ExpectError: regexp.MustCompile(`(?s)did not succeed.*failed\s+while\s+creating:\s+CloudRefused:.*unsupported\s+Kubernetes\s+version\s+1\.19`),
			},
			{
				// The failed job was kept, tainted: the plan replaces it
				// (its job canceled, a new one created, failing alike).
				PreConfig: func() {
					for id, j := range s.jobs(t) {
						if j.State == client.ProvisioningJobStateFailed {
							firstBad = id
						}
					}
					if firstBad == "" {
						t.Fatal("no failed job in the API after the refused apply")
					}
				},
				Config: withBad,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(bad, plancheck.ResourceActionDestroyBeforeCreate),
					plancheck.ExpectResourceAction(ok, plancheck.ResourceActionNoop),
				}},
				ExpectError: regexp.MustCompile(`(?s)did not succeed.*failed\s+while\s+creating:\s+CloudRefused:.*unsupported\s+Kubernetes\s+version\s+1\.19`),
			},
			{
				// Out of the configuration, the second failed job is
				// destroyed: canceled, like the first.
				Config: good,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(bad, plancheck.ResourceActionDestroy),
				}},
				Check: func(*tfstate.State) error {
					jobs := s.jobs(t)
					if len(jobs) != 3 {
						return fmt.Errorf("the API has %d jobs, want 3 (one succeeded, two refused)", len(jobs))
					}
					for id, j := range jobs {
						want := client.ProvisioningJobStateCanceled
						if id == jobID {
							want = client.ProvisioningJobStateSucceeded
						}
						if j.State != want {
							return fmt.Errorf("job %s is %s, want %s", id, j.State, want)
						}
					}
					if jobs[firstBad].Failure == nil || jobs[firstBad].Failure.Reason != "CloudRefused" {
						return fmt.Errorf("the first refused job's failure: %+v", jobs[firstBad].Failure)
					}
					return nil
				},
			},
			{
				// The create timeout passes before the job ends (the
				// cloud answers its creation 503 meanwhile, so the job can
				// only be queued, creating or failed: never registering,
				// which could not be canceled).
				PreConfig:   func() { s.st.Demo.Cloud.Fail("eks:CreateCluster", http.StatusServiceUnavailable) },
				Config:      withSlow("0s"),
				ExpectError: regexp.MustCompile(`(?s)did not end in time.*timeouts\.create`),
			},
			{
				// Kept tainted, in Spaces it goes on: destroying it
				// cancels it (the cloud still failing, so it created
				// nothing meanwhile).
				PreConfig: func() {
					for id, j := range s.jobs(t) {
						if cfg, _ := j.Config.AsAWSClusterConfig(); cfg.ClusterName == "tf-job-2" {
							firstSlow = id
						}
					}
					if firstSlow == "" {
						t.Fatal("no job for tf-job-2 in the API after the timed-out apply")
					}
				},
				Config: good,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("spaces_provisioning_job.slow", plancheck.ResourceActionDestroy),
				}},
				Check: func(*tfstate.State) error {
					if j := s.jobs(t)[firstSlow]; j.State != client.ProvisioningJobStateCanceled {
						return fmt.Errorf("the timed-out job %s is %s, want canceled", firstSlow, j.State)
					}
					return nil
				},
			},
			{
				// With the cloud back, a new job for the same cluster
				// succeeds (the canceled one released it).
				PreConfig: func() { s.st.Demo.Cloud.Fail("eks:CreateCluster", 0) },
				Config:    withSlow("5m"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("spaces_provisioning_job.slow", "status", "succeeded"),
					resource.TestCheckResourceAttrSet("spaces_provisioning_job.slow", "space_id"),
				),
			},
		},
		// Destroy forgets the succeeded job (Spaces keeps finished jobs)
		// and leaves its space registered.
		CheckDestroy: func(*tfstate.State) error {
			j, err := client.Result(s.api.GetProvisioningJobWithResponse(ctx, jobID, nil))
			if err != nil || j.JSON200.State != client.ProvisioningJobStateSucceeded {
				return fmt.Errorf("after destroy the job answers %v (%v), want succeeded", j, err)
			}
			if _, err := client.Result(s.api.GetSpaceWithResponse(ctx, spaceID, nil)); err != nil {
				return fmt.Errorf("after destroy the job's space answers %v, want it registered", err)
			}
			if ids := s.spaceIDs(t); len(ids) != 2 {
				return fmt.Errorf("after destroy the org has spaces %v, want the two jobs' spaces", ids)
			}
			return nil
		},
	})
}
