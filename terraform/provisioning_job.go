package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"spaces/client"
)

// jobResource is spaces_provisioning_job: a job that creates a cluster in
// a connected cloud account and registers it as a space. A job's settings
// cannot be edited, so every input replaces it. Create waits for the job
// to end within the create timeout; a job that did not succeed is kept in
// the state with an error, which taints it (the next apply cancels it and
// starts another). Destroy cancels a job that has not ended; the space a
// succeeded job registered is left alone (no route deletes a job, and
// Spaces never deletes a cluster).
type jobResource struct {
	api *client.API
	// poll is the first and longest wait between reads of a job.
	poll, maxPoll time.Duration
}

var (
	_ resource.ResourceWithConfigure   = (*jobResource)(nil)
	_ resource.ResourceWithImportState = (*jobResource)(nil)
)

// Default timeouts: a creation may take the job's own limit (an hour,
// after which the job fails TimedOut) plus its registration.
const (
	defaultJobCreateTimeout = 70 * time.Minute
	defaultJobDeleteTimeout = 10 * time.Minute
)

type jobModel struct {
	ID               types.String   `tfsdk:"id"`
	CloudAccountID   types.String   `tfsdk:"cloud_account_id"`
	Cloud            types.String   `tfsdk:"cloud"`
	Config           types.Map      `tfsdk:"config"`
	Name             types.String   `tfsdk:"name"`
	Spec             *jobSpecModel  `tfsdk:"spec"`
	Status           types.String   `tfsdk:"status"`
	SpaceID          types.String   `tfsdk:"space_id"`
	FailureStep      types.String   `tfsdk:"failure_step"`
	FailureReason    types.String   `tfsdk:"failure_reason"`
	FailureMessage   types.String   `tfsdk:"failure_message"`
	FailureRetryable types.Bool     `tfsdk:"failure_retryable"`
	LeftInCloud      types.String   `tfsdk:"left_in_cloud"`
	Timeouts         timeouts.Value `tfsdk:"timeouts"`
}

type jobSpecModel struct {
	KubernetesVersion types.String     `tfsdk:"kubernetes_version"`
	ClusterRoleARN    types.String     `tfsdk:"cluster_role_arn"`
	NodeRoleARN       types.String     `tfsdk:"node_role_arn"`
	NodePool          jobNodePoolModel `tfsdk:"node_pool"`
	Network           *jobNetworkModel `tfsdk:"network"`
	Tags              types.Map        `tfsdk:"tags"`
}

type jobNodePoolModel struct {
	MachineType  types.String `tfsdk:"machine_type"`
	MinNodes     types.Int64  `tfsdk:"min_nodes"`
	MaxNodes     types.Int64  `tfsdk:"max_nodes"`
	DesiredNodes types.Int64  `tfsdk:"desired_nodes"`
}

type jobNetworkModel struct {
	SubnetIDs        types.List   `tfsdk:"subnet_ids"`
	SecurityGroupIDs types.List   `tfsdk:"security_group_ids"`
	Network          types.String `tfsdk:"network"`
	Subnetwork       types.String `tfsdk:"subnetwork"`
	Location         types.String `tfsdk:"location"`
	VNetSubnetID     types.String `tfsdk:"vnet_subnet_id"`
}

func (r *jobResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_provisioning_job"
}

func (r *jobResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc,
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
	}
	resp.Schema = schema.Schema{
		Description: "A provisioning job: Spaces creates a cluster in a ready cloud account and registers it as a space. " +
			"Create waits for the job to end (timeouts.create); every input replaces the job. " +
			"Destroy cancels a job that has not ended and never deregisters the space a succeeded job registered.",
		Attributes: map[string]schema.Attribute{
			"id": computed("The job's id."),
			"cloud_account_id": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "A ready cloud account of the org, of the same cloud."},
			"cloud": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "The cloud: aws, gcp or azure (the API's provider)."},
			"config": schema.MapAttribute{Required: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				Description:   "The new cluster's identity at its cloud (aws: region, clusterName; gcp: projectId, region, clusterName; azure: subscriptionId, resourceGroup, clusterName)."},
			"name": schema.StringAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
				Description:   "The space's display name; default the cluster's name."},
			"spec": schema.SingleNestedAttribute{Required: true,
				PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()},
				Description:   "What the cloud is asked to build (the API's ClusterSpec); fields that do not apply to the cloud must be left out.",
				Attributes: map[string]schema.Attribute{
					"kubernetes_version": schema.StringAttribute{Required: true,
						Description: "The control plane's minor version, such as 1.31; the cloud says whether it offers it."},
					"cluster_role_arn": schema.StringAttribute{Optional: true,
						Description: "aws only: the IAM role the EKS control plane assumes (default: the connected role)."},
					"node_role_arn": schema.StringAttribute{Optional: true,
						Description: "aws only: the IAM role of the node group's instances (default: the connected role)."},
					"node_pool": schema.SingleNestedAttribute{Required: true,
						Description: "The cluster's one node pool.",
						Attributes: map[string]schema.Attribute{
							"machine_type":  schema.StringAttribute{Required: true, Description: "EC2 instance type, GCE machine type or Azure VM size."},
							"min_nodes":     schema.Int64Attribute{Required: true, Description: "At least 1 on Azure."},
							"max_nodes":     schema.Int64Attribute{Required: true},
							"desired_nodes": schema.Int64Attribute{Required: true, Description: "Between min_nodes and max_nodes."},
						}},
					"network": schema.SingleNestedAttribute{Optional: true,
						Description: "aws: subnet_ids (two availability zones at least) and security_group_ids; gcp: network and subnetwork; azure: location and vnet_subnet_id.",
						Attributes: map[string]schema.Attribute{
							"subnet_ids":         schema.ListAttribute{Optional: true, ElementType: types.StringType},
							"security_group_ids": schema.ListAttribute{Optional: true, ElementType: types.StringType},
							"network":            schema.StringAttribute{Optional: true},
							"subnetwork":         schema.StringAttribute{Optional: true},
							"location":           schema.StringAttribute{Optional: true},
							"vnet_subnet_id":     schema.StringAttribute{Optional: true},
						}},
					"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType,
						Description: "AWS tags, GCP resource labels or Azure tags."},
				}},
			"status":          computed("The job's state as last read: queued, creating, waiting-ready, registering, succeeded, failed or canceled."),
			"space_id":        computed("The space the job registered, once succeeded."),
			"failure_step":    computed("The state the job failed in, or null."),
			"failure_reason":  computed("Why it failed (CloudRefused, TimedOut, StepKeptFailing, CloudAccountUnusable, RegistrationRefused, or the cloud's own reason), or null."),
			"failure_message": computed("The cloud's (or the registration's) own message, or null."),
			"failure_retryable": schema.BoolAttribute{Computed: true, Description: "Whether a retry could succeed as the job stands, or null.",
				PlanModifiers: []planmodifier.Bool{boolplanmodifier.UseStateForUnknown()}},
			"left_in_cloud": computed("On a canceled job, what the cloud account still holds (Spaces never deletes a cluster)."),
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Delete: true}),
		},
	}
}

func (r *jobResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = apiOf(req.ProviderData, &resp.Diagnostics)
	if r.poll == 0 {
		r.poll, r.maxPoll = time.Second, 10*time.Second
	}
}

// jobBody is the POST /provisioning-jobs body of a plan.
func jobBody(ctx context.Context, plan jobModel) ([]byte, error) {
	cfg, err := stringMap(ctx, plan.Config)
	if err != nil {
		return nil, err
	}
	s := plan.Spec
	spec := map[string]any{"kubernetes_version": s.KubernetesVersion.ValueString(),
		"node_pool": map[string]any{"machine_type": s.NodePool.MachineType.ValueString(),
			"min_nodes": s.NodePool.MinNodes.ValueInt64(), "max_nodes": s.NodePool.MaxNodes.ValueInt64(),
			"desired_nodes": s.NodePool.DesiredNodes.ValueInt64()}}
	setString(spec, "cluster_role_arn", s.ClusterRoleARN)
	setString(spec, "node_role_arn", s.NodeRoleARN)
	if tags, _ := stringMap(ctx, s.Tags); len(tags) > 0 {
		spec["tags"] = tags
	}
	if n := s.Network; n != nil {
		net := map[string]any{}
		for k, l := range map[string]types.List{"subnet_ids": n.SubnetIDs, "security_group_ids": n.SecurityGroupIDs} {
			if l.IsNull() || l.IsUnknown() {
				continue
			}
			var ids []string
			if d := l.ElementsAs(ctx, &ids, false); d.HasError() {
				return nil, fmt.Errorf("spec.network.%s: not a list of strings", k)
			}
			net[k] = ids
		}
		setString(net, "network", n.Network)
		setString(net, "subnetwork", n.Subnetwork)
		setString(net, "location", n.Location)
		setString(net, "vnet_subnet_id", n.VNetSubnetID)
		spec["network"] = net
	}
	body := map[string]any{"provider": plan.Cloud.ValueString(), "cloud_account_id": plan.CloudAccountID.ValueString(),
		"config": cfg, "spec": spec}
	setString(body, "name", plan.Name)
	return json.Marshal(body)
}

// setString puts a known, non-null string in m; the API refuses null for
// an optional field, which must be left out instead.
func setString(m map[string]any, k string, v types.String) {
	if !v.IsNull() && !v.IsUnknown() {
		m[k] = v.ValueString()
	}
}

func optString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func optList(ctx context.Context, ids *[]string) types.List {
	if ids == nil || len(*ids) == 0 {
		return types.ListNull(types.StringType)
	}
	l, _ := types.ListValueFrom(ctx, types.StringType, *ids)
	return l
}

// fromJob is the state of a job as the API answered it. prior is what the
// state held (the plan on create), whose tags keep the configuration's
// empty map and whose timeouts are the configuration's.
func fromJob(ctx context.Context, j client.ProvisioningJob, prior jobModel) (jobModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	cfgRaw, _ := j.Config.MarshalJSON()
	cfg := map[string]string{}
	_ = json.Unmarshal(cfgRaw, &cfg)
	m := jobModel{
		ID: types.StringValue(j.Id.String()), CloudAccountID: types.StringValue(j.CloudAccountId.String()),
		Cloud: types.StringValue(string(j.Provider)), Status: types.StringValue(string(j.State)),
		SpaceID: types.StringNull(), FailureStep: types.StringNull(), FailureReason: types.StringNull(),
		FailureMessage: types.StringNull(), FailureRetryable: types.BoolNull(),
		LeftInCloud: types.StringNull(), Timeouts: prior.Timeouts,
	}
	var d diag.Diagnostics
	m.Config, d = types.MapValueFrom(ctx, types.StringType, cfg)
	diags.Append(d...)
	// The API leaves the name out when none was given: the space takes
	// the cluster's name.
	m.Name = types.StringValue(cfg["clusterName"])
	if j.Name != nil && *j.Name != "" {
		m.Name = types.StringValue(*j.Name)
	}
	if j.SpaceId != nil {
		m.SpaceID = types.StringValue(j.SpaceId.String())
	}
	if f := j.Failure; f != nil {
		m.FailureStep, m.FailureReason = types.StringValue(string(f.Step)), types.StringValue(f.Reason)
		m.FailureMessage, m.FailureRetryable = types.StringValue(f.Message), types.BoolValue(f.Retryable)
	}
	if j.LeftInCloud != nil {
		m.LeftInCloud = optString(*j.LeftInCloud)
	}
	s := j.Spec
	spec := &jobSpecModel{KubernetesVersion: types.StringValue(s.KubernetesVersion),
		ClusterRoleARN: types.StringNull(), NodeRoleARN: types.StringNull(),
		NodePool: jobNodePoolModel{MachineType: types.StringValue(s.NodePool.MachineType),
			MinNodes: types.Int64Value(int64(s.NodePool.MinNodes)), MaxNodes: types.Int64Value(int64(s.NodePool.MaxNodes)),
			DesiredNodes: types.Int64Value(int64(s.NodePool.DesiredNodes))},
		Tags: types.MapNull(types.StringType)}
	if s.ClusterRoleArn != nil {
		spec.ClusterRoleARN = optString(*s.ClusterRoleArn)
	}
	if s.NodeRoleArn != nil {
		spec.NodeRoleARN = optString(*s.NodeRoleArn)
	}
	switch {
	case s.Tags != nil && len(*s.Tags) > 0:
		spec.Tags, d = types.MapValueFrom(ctx, types.StringType, *s.Tags)
		diags.Append(d...)
	case prior.Spec != nil && !prior.Spec.Tags.IsNull() && !prior.Spec.Tags.IsUnknown():
		spec.Tags = types.MapValueMust(types.StringType, map[string]attr.Value{})
	}
	// The API answers an empty network for a spec without one.
	if n := s.Network; n != nil {
		net := &jobNetworkModel{SubnetIDs: optList(ctx, n.SubnetIds), SecurityGroupIDs: optList(ctx, n.SecurityGroupIds),
			Network: types.StringNull(), Subnetwork: types.StringNull(), Location: types.StringNull(), VNetSubnetID: types.StringNull()}
		for _, f := range []struct {
			dst *types.String
			src *string
		}{{&net.Network, n.Network}, {&net.Subnetwork, n.Subnetwork}, {&net.Location, n.Location}, {&net.VNetSubnetID, n.VnetSubnetId}} {
			if f.src != nil {
				*f.dst = optString(*f.src)
			}
		}
		if !net.SubnetIDs.IsNull() || !net.SecurityGroupIDs.IsNull() || !net.Network.IsNull() || !net.Subnetwork.IsNull() ||
			!net.Location.IsNull() || !net.VNetSubnetID.IsNull() {
			spec.Network = net
		}
	}
	m.Spec = spec
	return m, diags
}

// failureText is a failed (or canceled) job's diagnostic: the API's
// reason and the cloud's words, and what to do next.
func failureText(j client.ProvisioningJob) string {
	var b strings.Builder
	if f := j.Failure; f != nil {
		fmt.Fprintf(&b, "The job %s failed while %s: %s: %s (retryable: %t).", j.Id, f.Step, f.Reason, f.Message, f.Retryable)
	} else {
		fmt.Fprintf(&b, "The job %s is %s.", j.Id, j.State)
	}
	if j.LeftInCloud != nil && *j.LeftInCloud != "" {
		b.WriteString(" Left in the cloud: " + *j.LeftInCloud + ".")
	}
	b.WriteString(" The job is kept in the state as tainted: the next apply cancels it and starts a new one.")
	return b.String()
}

// wait reads the job until it leaves the states a delivery still moves
// (and registering, which only ends), or ctx ends. It answers the last job
// read, and ctx's error when it ended first.
func (r *jobResource) wait(ctx context.Context, j client.ProvisioningJob) (client.ProvisioningJob, error) {
	delay := r.poll
	for {
		switch j.State {
		case client.ProvisioningJobStateSucceeded, client.ProvisioningJobStateFailed, client.ProvisioningJobStateCanceled:
			return j, nil
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, r.maxPoll)
		res, err := client.Result(r.api.GetProvisioningJobWithResponse(ctx, j.Id.String(), nil))
		if err != nil {
			if ctx.Err() != nil {
				return j, ctx.Err()
			}
			return j, err
		}
		j = *res.JSON200
	}
}

func (r *jobResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan jobModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	limit, d := plan.Timeouts.Create(ctx, defaultJobCreateTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	body, err := jobBody(ctx, plan)
	if err != nil {
		resp.Diagnostics.AddError("Bad provisioning job", err.Error())
		return
	}
	// The client sends an Idempotency-Key, so a retried create answers the
	// same job rather than a second one.
	res, err := client.Result(r.api.CreateProvisioningJobWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(string(body))))
	if err != nil {
		resp.Diagnostics.AddError("Cannot create the provisioning job", err.Error())
		return
	}
	waitCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	job, werr := r.wait(waitCtx, *res.JSON201)
	// The job exists whatever happened while waiting: it is saved, so that
	// an error taints it and destroy or replace can cancel it.
	m, d := fromJob(ctx, job, plan)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
	switch {
	case errors.Is(werr, context.DeadlineExceeded):
		resp.Diagnostics.AddError("The provisioning job did not end in time",
			fmt.Sprintf("The job %s is still %s after %s (timeouts.create). It goes on in Spaces; it is kept in the state as tainted, "+
				"so the next apply cancels it and starts a new one. Raise timeouts.create to wait longer.", job.Id, job.State, limit))
	case werr != nil:
		resp.Diagnostics.AddError("Cannot follow the provisioning job",
			fmt.Sprintf("The job %s was last read %s: %v. It is kept in the state as tainted.", job.Id, job.State, werr))
	case job.State != client.ProvisioningJobStateSucceeded:
		resp.Diagnostics.AddError("The provisioning job did not succeed", failureText(job))
	}
}

func (r *jobResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state jobModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := client.Result(r.api.GetProvisioningJobWithResponse(ctx, state.ID.ValueString(), nil))
	if errors.Is(err, client.ErrNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the provisioning job", err.Error())
		return
	}
	m, d := fromJob(ctx, *res.JSON200, state)
	resp.Diagnostics.Append(d...)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

// Update changes only timeouts (every input replaces the job): it keeps
// the plan.
func (r *jobResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan jobModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *jobResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state jobModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	limit, d := state.Timeouts.Delete(ctx, defaultJobDeleteTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	id := state.ID.ValueString()
	res, err := client.Result(r.api.CancelProvisioningJobWithResponse(ctx, id, nil))
	switch {
	case err == nil:
		if left := res.JSON200.LeftInCloud; left != nil && *left != "" {
			resp.Diagnostics.AddWarning("The cloud keeps what the job made",
				fmt.Sprintf("The job %s is canceled; Spaces never deletes a cluster: %s.", id, *left))
		}
		return
	case errors.Is(err, client.ErrNotFound):
		return
	case !errors.Is(err, client.ErrConflict):
		resp.Diagnostics.AddError("Cannot cancel the provisioning job", err.Error())
		return
	}
	// 409: succeeded, canceled already, or registering (which only ends,
	// in success or failure).
	got, gerr := client.Result(r.api.GetProvisioningJobWithResponse(ctx, id, nil))
	if errors.Is(gerr, client.ErrNotFound) {
		return
	}
	if gerr != nil {
		resp.Diagnostics.AddError("Cannot read the provisioning job", gerr.Error())
		return
	}
	job, werr := r.wait(ctx, *got.JSON200)
	if werr != nil {
		resp.Diagnostics.AddError("Cannot cancel the provisioning job",
			fmt.Sprintf("%v; the job is %s and cannot be canceled until it ends: %v", err, job.State, werr))
		return
	}
	switch job.State {
	case client.ProvisioningJobStateSucceeded:
		space := ""
		if job.SpaceId != nil {
			space = job.SpaceId.String()
		}
		resp.Diagnostics.AddWarning("The space the job registered is kept",
			fmt.Sprintf("The job %s succeeded and is removed from the state only: Spaces keeps finished jobs, and destroying the job "+
				"does not deregister its space %s. Manage the space with spaces_space (import it by id), or deregister it.", id, space))
	case client.ProvisioningJobStateFailed:
		// It failed while registering: now it can be canceled.
		if _, err := client.Result(r.api.CancelProvisioningJobWithResponse(ctx, id, nil)); err != nil && !errors.Is(err, client.ErrNotFound) {
			resp.Diagnostics.AddError("Cannot cancel the provisioning job", err.Error())
		}
	}
}

func (r *jobResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}
