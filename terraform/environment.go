package terraform

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"spaces/client"
)

// environmentResource is spaces_environment: an environment bound to a
// space. A new space_id rebinds it in place (which also lifts a gate);
// name and namespace are fixed at creation. The API has no route that
// deletes an environment, so destroy forgets it with a warning.
type environmentResource struct {
	api *client.API
}

var (
	_ resource.ResourceWithConfigure   = (*environmentResource)(nil)
	_ resource.ResourceWithImportState = (*environmentResource)(nil)
)

type environmentModel struct {
	ID         types.String `tfsdk:"id"`
	Name       types.String `tfsdk:"name"`
	SpaceID    types.String `tfsdk:"space_id"`
	Namespace  types.String `tfsdk:"namespace"`
	GateReason types.String `tfsdk:"gate_reason"`
}

func (r *environmentResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_environment"
}

func (r *environmentResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A deployment environment bound to a space. A new space_id rebinds it in place; " +
			"the API keeps environments, so destroy removes it from the state only (with a warning).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The environment's id.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description:   "The environment's name."},
			"space_id": schema.StringAttribute{Required: true,
				Description: "The space it deploys to; changed in place (a rebind, which lifts a gate)."},
			"namespace": schema.StringAttribute{Optional: true, Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplaceIfConfigured(), stringplanmodifier.UseStateForUnknown()},
				Description:   "Where its revisions are applied on the space's cluster; default the name when it is a DNS label."},
			"gate_reason": schema.StringAttribute{Computed: true,
				Description: "Why it takes no new deployments (Space deregistered), or null."},
		},
	}
}

func (r *environmentResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = apiOf(req.ProviderData, &resp.Diagnostics)
}

// fromEnvironment is the state of an environment as the API answered it.
func fromEnvironment(e client.Environment) environmentModel {
	m := environmentModel{
		ID: types.StringValue(e.Id.String()), Name: types.StringValue(e.Name),
		SpaceID: types.StringValue(e.SpaceId.String()), Namespace: types.StringValue(e.Namespace),
		GateReason: types.StringNull(),
	}
	if e.Gate != nil {
		m.GateReason = types.StringValue(e.Gate.Reason)
	}
	return m
}

func (r *environmentResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan environmentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	spaceID, err := uuid.Parse(plan.SpaceID.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("space_id"), "Bad space_id", err.Error())
		return
	}
	body := client.CreateEnvironmentRequest{Name: plan.Name.ValueString(), SpaceId: spaceID}
	if !plan.Namespace.IsNull() && !plan.Namespace.IsUnknown() {
		ns := plan.Namespace.ValueString()
		body.Namespace = &ns
	}
	res, err := client.Result(r.api.CreateEnvironmentWithResponse(ctx, nil, body))
	if err != nil {
		resp.Diagnostics.AddError("Cannot create the environment", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, fromEnvironment(*res.JSON201))...)
}

func (r *environmentResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state environmentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := client.Result(r.api.GetEnvironmentWithResponse(ctx, state.ID.ValueString(), nil))
	if errors.Is(err, client.ErrNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the environment", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, fromEnvironment(*res.JSON200))...)
}

func (r *environmentResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state environmentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	spaceID, err := uuid.Parse(plan.SpaceID.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("space_id"), "Bad space_id", err.Error())
		return
	}
	// space_id is the one attribute that changes in place.
	res, err := client.Result(r.api.RebindEnvironmentWithResponse(ctx, state.ID.ValueString(), nil,
		client.RebindEnvironmentRequest{SpaceId: spaceID}))
	if err != nil {
		resp.Diagnostics.AddError("Cannot bind the environment to the space", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, fromEnvironment(*res.JSON200))...)
}

func (r *environmentResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state environmentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// No route deletes an environment: the framework drops it from the
	// state after Delete; say so rather than pretend.
	resp.Diagnostics.AddWarning("The environment is kept by Spaces",
		fmt.Sprintf("Spaces has no way to delete an environment: %s (%s) is removed from the state only. "+
			"Import it again with its id to manage it.", state.ID.ValueString(), state.Name.ValueString()))
}

func (r *environmentResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}
