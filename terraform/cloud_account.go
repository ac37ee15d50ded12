package terraform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"spaces/client"
)

// cloudAccountResource is spaces_cloud_account: a connection to a cloud
// account, its setup (what the customer's cloud must trust) exported as
// attributes ready for aws_iam_role's assume_role_policy, a GCP IAM
// binding or an Azure federated credential. Nothing changes in place.
type cloudAccountResource struct {
	api *client.API
}

var (
	_ resource.ResourceWithConfigure   = (*cloudAccountResource)(nil)
	_ resource.ResourceWithImportState = (*cloudAccountResource)(nil)
)

type cloudAccountModel struct {
	ID               types.String `tfsdk:"id"`
	Cloud            types.String `tfsdk:"cloud"`
	Name             types.String `tfsdk:"name"`
	Connection       types.Map    `tfsdk:"connection_settings"`
	Status           types.String `tfsdk:"status"`
	StatusReason     types.String `tfsdk:"status_reason"`
	SetupPrincipal   types.String `tfsdk:"setup_principal"`
	SetupExternalID  types.String `tfsdk:"setup_external_id"`
	SetupTrustPolicy types.String `tfsdk:"setup_trust_policy"`
	SetupIssuer      types.String `tfsdk:"setup_issuer"`
	SetupSubject     types.String `tfsdk:"setup_subject"`
	SetupAudience    types.String `tfsdk:"setup_audience"`
}

func (r *cloudAccountResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cloud_account"
}

func (r *cloudAccountResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	// The setup is fixed when the account is created.
	setup := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc,
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
	}
	resp.Schema = schema.Schema{
		Description: "A cloud account Spaces federates into, and what its cloud must trust (setup_*). " +
			"spaces_cloud_account_verification checks that trust once the customer's side is applied.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The account's id.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"cloud": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "aws, gcp or azure."},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "Display name."},
			"connection_settings": schema.MapAttribute{Required: true, ElementType: types.StringType,
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				Description:   "How Spaces federates in, exactly the keys of the cloud (aws: roleArn; gcp: projectId, serviceAccountEmail; azure: tenantId, clientId, subscriptionId). No secrets."},
			"status": schema.StringAttribute{Computed: true,
				Description: "pending until verified, ready, or failed; as last read."},
			"status_reason": schema.StringAttribute{Computed: true,
				Description: "Why it is not ready (NotVerified, AccessDenied, ...), or null."},
			"setup_principal":    setup("The identity Spaces presents to the cloud for this org."),
			"setup_external_id":  setup("aws: the sts:ExternalId the role's trust requires."),
			"setup_trust_policy": setup("aws: the role's whole trust policy document (JSON), for aws_iam_role's assume_role_policy."),
			"setup_issuer":       setup("azure: the federated credential's issuer."),
			"setup_subject":      setup("azure: the federated credential's subject."),
			"setup_audience":     setup("azure: the federated credential's audience."),
		},
	}
}

func (r *cloudAccountResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = apiOf(req.ProviderData, &resp.Diagnostics)
}

// fromCloudAccount is the state of an account as the API answered it.
func fromCloudAccount(ctx context.Context, a client.CloudAccount) cloudAccountModel {
	raw, _ := a.Connection.MarshalJSON()
	conn := map[string]string{}
	_ = json.Unmarshal(raw, &conn)
	// The API adds the AWS external id it generated to the connection;
	// it is setup_external_id here, so the configured map stays as written.
	delete(conn, "externalId")
	m := cloudAccountModel{
		ID: types.StringValue(a.Id.String()), Cloud: types.StringValue(string(a.Provider)), Name: types.StringValue(a.Name),
		Status: types.StringValue(string(a.Status)), StatusReason: types.StringPointerValue(a.StatusReason),
		SetupPrincipal: types.StringNull(), SetupExternalID: types.StringNull(), SetupTrustPolicy: types.StringNull(),
		SetupIssuer: types.StringNull(), SetupSubject: types.StringNull(), SetupAudience: types.StringNull(),
	}
	m.Connection, _ = types.MapValueFrom(ctx, types.StringType, conn)
	if s := a.Setup; s != nil {
		m.SetupPrincipal = types.StringValue(s.Principal)
		m.SetupExternalID = types.StringPointerValue(s.ExternalId)
		m.SetupIssuer, m.SetupSubject, m.SetupAudience = types.StringPointerValue(s.Issuer), types.StringPointerValue(s.Subject), types.StringPointerValue(s.Audience)
		if s.TrustPolicy != nil {
			doc, _ := json.Marshal(*s.TrustPolicy)
			m.SetupTrustPolicy = types.StringValue(string(doc))
		}
	}
	return m
}

func (r *cloudAccountResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan cloudAccountModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	conn, err := stringMap(ctx, plan.Connection)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("connection_settings"), "Bad connection", err.Error())
		return
	}
	body, _ := json.Marshal(map[string]any{"provider": plan.Cloud.ValueString(), "name": plan.Name.ValueString(), "connection": conn})
	res, err := client.Result(r.api.CreateCloudAccountWithBodyWithResponse(ctx, nil, "application/json", bytes.NewReader(body)))
	if err != nil {
		resp.Diagnostics.AddError("Cannot connect the cloud account", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, fromCloudAccount(ctx, *res.JSON201))...)
}

func (r *cloudAccountResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state cloudAccountModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := client.Result(r.api.GetCloudAccountWithResponse(ctx, state.ID.ValueString(), nil))
	if errors.Is(err, client.ErrNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the cloud account", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, fromCloudAccount(ctx, *res.JSON200))...)
}

// Update is never called with a change (every argument forces a
// replacement); it keeps the state the plan has.
func (r *cloudAccountResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan cloudAccountModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *cloudAccountResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state cloudAccountModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, err := client.Result(r.api.DeleteCloudAccountWithResponse(ctx, state.ID.ValueString(), nil))
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		resp.Diagnostics.AddError("Cannot remove the cloud account", err.Error())
	}
}

func (r *cloudAccountResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resource.ImportStatePassthroughID(ctx, path.Root("id"), req, resp)
}

// verificationResource is spaces_cloud_account_verification: its create
// asks Spaces to verify the account's trust (POST …/verify) and fails with
// the cloud's reason unless the account is ready. It exists while the
// account is ready: a refresh that finds the account not ready drops it,
// so the next apply verifies again. Destroy forgets it.
type verificationResource struct {
	api *client.API
}

var _ resource.ResourceWithConfigure = (*verificationResource)(nil)

type verificationModel struct {
	ID             types.String `tfsdk:"id"`
	CloudAccountID types.String `tfsdk:"cloud_account_id"`
	Status         types.String `tfsdk:"status"`
}

func (r *verificationResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cloud_account_verification"
}

func (r *verificationResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Verifies a cloud account's trust once the customer's side (setup_*) is applied; fails with the cloud's reason otherwise.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The account's id.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"cloud_account_id": schema.StringAttribute{Required: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description:   "The account to verify; depend on the resources that apply its setup."},
			"status": schema.StringAttribute{Computed: true,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
				Description:   "ready."},
		},
	}
}

func (r *verificationResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.api = apiOf(req.ProviderData, &resp.Diagnostics)
}

func (r *verificationResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan verificationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := client.Result(r.api.VerifyCloudAccountWithResponse(ctx, plan.CloudAccountID.ValueString(), nil))
	if err != nil {
		resp.Diagnostics.AddError("The cloud account is not verified", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, verificationModel{ID: types.StringValue(res.JSON200.Id.String()),
		CloudAccountID: plan.CloudAccountID, Status: types.StringValue(string(res.JSON200.Status))})...)
}

func (r *verificationResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state verificationModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := client.Result(r.api.GetCloudAccountWithResponse(ctx, state.CloudAccountID.ValueString(), nil))
	if errors.Is(err, client.ErrNotFound) || (err == nil && res.JSON200.Status != client.CloudAccountStatusReady) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the cloud account", err.Error())
	}
}

func (r *verificationResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan verificationModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *verificationResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {
}
