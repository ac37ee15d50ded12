package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"spaces/client"
)

// spaceResource is spaces_space: a registered cluster. Everything but its
// labels is fixed at registration, so a change replaces it; a space
// deregistered out of band reads as gone and is planned for re-creation.
type spaceResource struct {
	api *client.API
}

type spaceModel struct {
	ID             types.String `tfsdk:"id"`
	CloudAccountID types.String `tfsdk:"cloud_account_id"`
	Cloud          types.String `tfsdk:"cloud"`
	Config         types.Map    `tfsdk:"config"`
	Name           types.String `tfsdk:"name"`
	Labels         types.Map    `tfsdk:"labels"`
	Connectivity   types.String `tfsdk:"connectivity"`
	Synthetic      types.Bool   `tfsdk:"synthetic"`
	Status         types.String `tfsdk:"status"`
}

func (r *spaceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_space"
}

func (r *spaceResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A cluster registered as a space. Only labels change in place; anything else registers it anew.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The space's id.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"cloud_account_id": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "The connected cloud account the cluster is in."},
			"cloud": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "The cloud: aws, gcp or azure (the API's provider)."},
			"config": schema.MapAttribute{Required: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				Description:   "The cluster's identity at its cloud (aws: region, clusterName; gcp: projectId, location, clusterName; azure: subscriptionId, resourceGroup, clusterName)."},
			"name": schema.StringAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
				Description:   "Display name; default the cluster's name."},
			"labels": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "The space's labels (Kubernetes label rules); changed in place."},
			"connectivity": schema.StringAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
				Description:   "direct (Spaces calls the API server) or agent (an agent in the cluster connects out)."},
			"synthetic": schema.BoolAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplaceIfConfigured(), boolplanmodifier.UseStateForUnknown()},
				Description:   "A placeholder that is not a real cluster (no cloud is asked)."},
			"status": schema.StringAttribute{Computed: true,
				Description: "active, inactive or unknown, as last read."},
		},
	}
	agentSchema(ctx, &resp.Schema)
}

func (r *spaceResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = apiOf(req.ProviderData, &resp.Diagnostics)
}

func stringMap(ctx context.Context, m types.Map) (map[string]string, error) {
	out := map[string]string{}
	if m.IsNull() || m.IsUnknown() {
		return out, nil
	}
	if d := m.ElementsAs(ctx, &out, false); d.HasError() {
		return nil, errors.New("not a map of strings")
	}
	return out, nil
}

func (r *spaceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan spaceResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cfg, err := stringMap(ctx, plan.Config)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("config"), "Bad config", err.Error())
		return
	}
	// Where the agent goes is checked before anything is registered: a
	// kubeconfig without that context changes nothing.
	if resp.Diagnostics.Append(checkTarget(ctx, plan)...); resp.Diagnostics.HasError() {
		return
	}
	body := map[string]any{"provider": plan.Cloud.ValueString(), "space_type": "kubernetes",
		"cloud_account_id": plan.CloudAccountID.ValueString(), "config": cfg}
	if !plan.Name.IsNull() && !plan.Name.IsUnknown() {
		body["name"] = plan.Name.ValueString()
	}
	if !plan.Connectivity.IsNull() && !plan.Connectivity.IsUnknown() {
		body["connectivity"] = plan.Connectivity.ValueString()
	}
	if !plan.Synthetic.IsNull() && !plan.Synthetic.IsUnknown() {
		body["synthetic"] = plan.Synthetic.ValueBool()
	}
	if labels, _ := stringMap(ctx, plan.Labels); len(labels) > 0 {
		body["labels"] = labels
	}
	raw, _ := json.Marshal(body)
	res, err := client.Result(r.api.RegisterSpaceWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(string(raw))))
	if err != nil {
		resp.Diagnostics.AddError("Cannot register the space", err.Error())
		return
	}
	m := spaceResourceModel{spaceModel: fromSpace(ctx, *res.JSON201, plan.Labels)}
	m.keepAgent(plan)
	m.AgentInstallManifests, err = render(m, res.JSON201.AgentBootstrap)
	// The space exists from here on: it is kept in the state whatever
	// fails next (an error then marks it for replacement).
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
	if err != nil {
		resp.Diagnostics.AddError("Cannot render the agent's manifests", err.Error())
	}
	if resp.Diagnostics.HasError() {
		return
	}
	if resp.Diagnostics.Append(installAgent(ctx, m)...); resp.Diagnostics.HasError() {
		return
	}
	if m.WaitForActive.ValueBool() {
		err := r.waitActive(ctx, &m)
		resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
		if err != nil {
			resp.Diagnostics.AddError("The space did not turn active", err.Error())
		}
	}
}

// fromSpace is the state of a space as the API answered it. Labels keep
// the configuration's null when the space has none, so that no labels and
// an empty map plan no change.
func fromSpace(ctx context.Context, s client.Space, configured types.Map) spaceModel {
	cfgRaw, _ := s.Config.MarshalJSON()
	cfg := map[string]string{}
	_ = json.Unmarshal(cfgRaw, &cfg)
	m := spaceModel{
		ID: types.StringValue(s.Id.String()), CloudAccountID: types.StringValue(s.CloudAccountId.String()),
		Cloud: types.StringValue(string(s.Provider)), Name: types.StringValue(s.Name),
		Synthetic: types.BoolValue(s.Synthetic), Status: types.StringValue(string(s.Status)),
		Connectivity: types.StringValue("direct"),
	}
	if s.Connectivity != nil {
		m.Connectivity = types.StringValue(string(*s.Connectivity))
	}
	m.Config, _ = types.MapValueFrom(ctx, types.StringType, cfg)
	switch {
	case s.Labels != nil && len(*s.Labels) > 0:
		m.Labels, _ = types.MapValueFrom(ctx, types.StringType, map[string]string(*s.Labels))
	case !configured.IsNull() && !configured.IsUnknown():
		m.Labels, _ = types.MapValueFrom(ctx, types.StringType, map[string]string{})
	default:
		m.Labels = types.MapNull(types.StringType)
	}
	return m
}

func (r *spaceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state spaceResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := client.Result(r.api.GetSpaceWithResponse(ctx, state.ID.ValueString(), nil))
	if errors.Is(err, client.ErrNotFound) {
		// Deregistered out of band: gone from the state, so the next
		// plan registers it again.
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the space", err.Error())
		return
	}
	m := spaceResourceModel{spaceModel: fromSpace(ctx, *res.JSON200, state.Labels)}
	m.keepAgent(state)
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func (r *spaceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state spaceResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if reinstall(plan, state) {
		if d := checkTarget(ctx, plan); d.HasError() {
			resp.State.Raw = req.State.Raw // nothing changed
			resp.Diagnostics.Append(d...)
			return
		}
	}
	labels, err := stringMap(ctx, plan.Labels)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("labels"), "Bad labels", err.Error())
		return
	}
	var sp client.Space
	if plan.Labels.Equal(state.Labels) {
		res, err := client.Result(r.api.GetSpaceWithResponse(ctx, state.ID.ValueString(), nil))
		if err != nil {
			resp.Diagnostics.AddError("Cannot read the space", err.Error())
			return
		}
		sp = *res.JSON200
	} else {
		res, err := client.Result(r.api.SetSpaceLabelsWithResponse(ctx, state.ID.ValueString(), nil, client.SetLabelsRequest{Labels: labels}))
		if err != nil {
			resp.Diagnostics.AddError("Cannot set the space's labels", err.Error())
			return
		}
		sp = *res.JSON200
	}
	m := spaceResourceModel{spaceModel: fromSpace(ctx, sp, plan.Labels)}
	m.keepAgent(plan)
	m.AgentInstallManifests = state.AgentInstallManifests
	if !reinstall(plan, state) {
		resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
		return
	}
	// A new bootstrap: the agent's current credential keeps working until
	// the agent exchanges it; an unused earlier one stops working.
	m.AgentInstallManifests, err = r.reissue(ctx, m)
	if err != nil {
		m.AgentInstallManifests = state.AgentInstallManifests
		resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
		resp.Diagnostics.AddError("Cannot reissue the agent's bootstrap", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
	resp.Diagnostics.Append(installAgent(ctx, m)...)
}

func (r *spaceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state spaceResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, err := client.Result(r.api.DeregisterSpaceWithResponse(ctx, state.ID.ValueString(), nil))
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		resp.Diagnostics.AddError("Cannot deregister the space", err.Error())
		return
	}
	// Deregistered first, so that the agent's next call is refused and it
	// stops; then what the provider applied goes (a failure keeps the
	// resource, and the next destroy finds the space gone and tries again).
	resp.Diagnostics.Append(uninstallAgent(ctx, state)...)
}

func (r *spaceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
