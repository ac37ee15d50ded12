package terraform

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"spaces/agent/install"
	"spaces/agent/manifests"
	"spaces/client"
)

// An agent space's install, on spaces_space: the manifests rendered by
// agent/manifests (as make agent-image and spaces agent install render
// them) with the bootstrap token the registration answers once, as a
// sensitive attribute for another tool to apply; or applied by the
// provider itself through a kubeconfig (agent/install, the CLI's code),
// and deleted again at destroy. The token is known only at create (or
// when a change of the install asks for a new one): it is kept in the
// state, inside agent_install_manifests, never read back.

// fieldManager names the provider's server-side applies.
const fieldManager = "terraform-provider-spaces"

// defaultWaitTimeout bounds wait_for_active when timeouts.create is not set.
const defaultWaitTimeout = 10 * time.Minute

// waitInterval is how often a create that waits reads the space.
const waitInterval = 2 * time.Second

var (
	_ resource.ResourceWithConfigure      = (*spaceResource)(nil)
	_ resource.ResourceWithImportState    = (*spaceResource)(nil)
	_ resource.ResourceWithValidateConfig = (*spaceResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*spaceResource)(nil)
)

var agentInstallTypes = map[string]attr.Type{"kubeconfig": types.StringType, "context": types.StringType}

// agentModel is what spaces_space (spaceResourceModel) has beyond the
// data source's spaceModel: kept from the configuration and the state,
// never read from the API.
type agentModel struct {
	AgentImage            types.String   `tfsdk:"agent_image"`
	AgentURL              types.String   `tfsdk:"agent_url"`
	AgentInstall          types.Object   `tfsdk:"agent_install"`
	AgentInstallManifests types.String   `tfsdk:"agent_install_manifests"`
	WaitForActive         types.Bool     `tfsdk:"wait_for_active"`
	Timeouts              timeouts.Value `tfsdk:"timeouts"`
}

type spaceResourceModel struct {
	spaceModel
	agentModel
}

type agentInstallModel struct {
	Kubeconfig types.String `tfsdk:"kubeconfig"`
	Context    types.String `tfsdk:"context"`
}

func agentSchema(ctx context.Context, sch *schema.Schema) {
	sch.Blocks = map[string]schema.Block{"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true})}
	attrs := sch.Attributes
	attrs["agent_image"] = schema.StringAttribute{Optional: true,
		Description: "connectivity agent: the agent's image (make agent-image prints it). With agent_url, renders agent_install_manifests; a change installs again (a new bootstrap), in place."}
	attrs["agent_url"] = schema.StringAttribute{Optional: true,
		Description: "connectivity agent: where the agent calls Spaces (the stack's AgentUrl output). A change installs again, in place."}
	attrs["agent_install"] = schema.SingleNestedAttribute{Optional: true,
		Description: "connectivity agent: the provider applies agent_install_manifests itself (server-side apply, as spaces agent install does) to this kubeconfig context, and deletes those objects at destroy. A change installs again, in place; removing it leaves the agent installed.",
		Attributes: map[string]schema.Attribute{
			"kubeconfig": schema.StringAttribute{Optional: true,
				Description: "The kubeconfig file; default $KUBECONFIG, else ~/.kube/config."},
			"context": schema.StringAttribute{Required: true,
				Description: "The kubeconfig context of the space's cluster."},
		}}
	attrs["agent_install_manifests"] = schema.StringAttribute{Computed: true, Sensitive: true,
		Description: "connectivity agent, with agent_image and agent_url: the agent's manifests (namespace, ServiceAccount, RBAC, its state Secret, the bootstrap Secret with the one-time token, the Deployment) as one multi-document YAML stream. Known from create on; kept in the state (the token is answered once). Null after an import."}
	attrs["wait_for_active"] = schema.BoolAttribute{Optional: true,
		Description: "Create returns only once the space is active (an agent space: once its agent renewed its lease), within timeouts.create (default 10m); default false."}
}

// keepAgent carries the agent's settings over from the plan or the state:
// the API has none of them.
func (m *spaceResourceModel) keepAgent(from spaceResourceModel) {
	m.agentModel = from.agentModel
	if m.AgentInstall.IsNull() || m.AgentInstall.IsUnknown() {
		m.AgentInstall = types.ObjectNull(agentInstallTypes)
	}
	if m.AgentInstallManifests.IsUnknown() {
		m.AgentInstallManifests = types.StringNull()
	}
}

func set(v basetypes.StringValue) bool { return !v.IsNull() && !v.IsUnknown() && v.ValueString() != "" }

func (r *spaceResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var c spaceResourceModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &c)...)
	if resp.Diagnostics.HasError() {
		return
	}
	agentish := map[string]bool{"agent_image": !c.AgentImage.IsNull(), "agent_url": !c.AgentURL.IsNull(), "agent_install": !c.AgentInstall.IsNull()}
	if !c.Connectivity.IsUnknown() && c.Connectivity.ValueString() != "agent" {
		for name, given := range agentish {
			if given {
				resp.Diagnostics.AddAttributeError(path.Root(name), "Only for agent spaces",
					name+" installs the agent of a space with connectivity = \"agent\".")
			}
		}
	}
	if !c.AgentInstall.IsNull() {
		for _, name := range []string{"agent_image", "agent_url"} {
			if !agentish[name] {
				resp.Diagnostics.AddAttributeError(path.Root(name), "Missing "+name,
					"agent_install applies the agent's manifests, which need agent_image and agent_url.")
			}
		}
	}
}

// ModifyPlan keeps the manifests of the state unless the install changes,
// which asks for a new bootstrap (known after apply).
func (r *spaceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var plan, state spaceResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	manifests := state.AgentInstallManifests
	if reinstall(plan, state) {
		manifests = types.StringUnknown()
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("agent_install_manifests"), manifests)...)
}

// reinstall: the plan changes what the install renders or where it goes.
func reinstall(plan, state spaceResourceModel) bool {
	return !plan.AgentImage.Equal(state.AgentImage) || !plan.AgentURL.Equal(state.AgentURL) || !plan.AgentInstall.Equal(state.AgentInstall)
}

// render is the agent's manifests with a bootstrap, or null when the
// space is not an agent space or the image or URL is not configured.
func render(m spaceResourceModel, boot *client.AgentBootstrap) (types.String, error) {
	if boot == nil || !set(m.AgentImage) || !set(m.AgentURL) {
		return types.StringNull(), nil
	}
	out, err := manifests.Render(manifests.Values{Image: m.AgentImage.ValueString(), AgentURL: m.AgentURL.ValueString(),
		BootstrapToken: boot.Token, BootstrapExpires: boot.ExpiresAt.UTC().Truncate(time.Second)})
	if err != nil {
		return types.StringNull(), err
	}
	return types.StringValue(string(out)), nil
}

// target is where agent_install applies, if set.
func target(ctx context.Context, m spaceResourceModel) (*agentInstallModel, diag.Diagnostics) {
	if m.AgentInstall.IsNull() || m.AgentInstall.IsUnknown() {
		return nil, nil
	}
	var t agentInstallModel
	d := m.AgentInstall.As(ctx, &t, basetypes.ObjectAsOptions{})
	return &t, d
}

// checkTarget: agent_install's kubeconfig has its context.
func checkTarget(ctx context.Context, m spaceResourceModel) diag.Diagnostics {
	t, diags := target(ctx, m)
	if t == nil || diags.HasError() {
		return diags
	}
	if _, err := install.RESTConfig(t.Kubeconfig.ValueString(), t.Context.ValueString()); err != nil {
		diags.AddAttributeError(path.Root("agent_install"), "Cannot install the agent", err.Error())
	}
	return diags
}

// installAgent applies the state's manifests where agent_install says;
// nothing without either.
func installAgent(ctx context.Context, m spaceResourceModel) diag.Diagnostics {
	var diags diag.Diagnostics
	t, d := target(ctx, m)
	diags.Append(d...)
	if t == nil || diags.HasError() || !set(m.AgentInstallManifests) {
		return diags
	}
	rc, err := install.RESTConfig(t.Kubeconfig.ValueString(), t.Context.ValueString())
	if err == nil {
		err = install.Apply(ctx, rc, []byte(m.AgentInstallManifests.ValueString()), fieldManager, nil)
	}
	if err != nil {
		diags.AddAttributeError(path.Root("agent_install"), "Cannot install the agent", err.Error())
	}
	return diags
}

// uninstallAgent deletes what installAgent applied.
func uninstallAgent(ctx context.Context, m spaceResourceModel) diag.Diagnostics {
	var diags diag.Diagnostics
	t, d := target(ctx, m)
	diags.Append(d...)
	if t == nil || diags.HasError() || !set(m.AgentInstallManifests) {
		return diags
	}
	rc, err := install.RESTConfig(t.Kubeconfig.ValueString(), t.Context.ValueString())
	if err == nil {
		err = install.Delete(ctx, rc, []byte(m.AgentInstallManifests.ValueString()), nil)
	}
	if err != nil {
		diags.AddAttributeError(path.Root("agent_install"), "Cannot remove the agent", err.Error())
	}
	return diags
}

// reissue asks for a new bootstrap and renders the manifests with it.
func (r *spaceResource) reissue(ctx context.Context, m spaceResourceModel) (types.String, error) {
	if !set(m.AgentImage) || !set(m.AgentURL) {
		return types.StringNull(), nil
	}
	res, err := client.Result(r.api.ReissueAgentBootstrapWithResponse(ctx, m.ID.ValueString(), nil))
	if err != nil {
		return types.StringNull(), err
	}
	return render(m, res.JSON201)
}

// waitActive reads the space until it is active, within timeouts.create.
func (r *spaceResource) waitActive(ctx context.Context, m *spaceResourceModel) error {
	limit, d := m.Timeouts.Create(ctx, defaultWaitTimeout)
	if d.HasError() {
		return fmt.Errorf("timeouts.create: %v", d)
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(waitInterval)
	defer tick.Stop()
	for {
		res, err := client.Result(r.api.GetSpaceWithResponse(ctx, m.ID.ValueString(), nil))
		if err == nil {
			m.Status = types.StringValue(string(res.JSON200.Status))
			if res.JSON200.Status == client.StatusActive {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the space is %s after %s (timeouts.create)", m.Status.ValueString(), limit)
		case <-tick.C:
		}
	}
}
