// Package terraform is the Spaces provider for Terraform and OpenTofu
// (terraform-plugin-framework): the resources spaces_space,
// spaces_environment, spaces_cloud_account,
// spaces_cloud_account_verification and spaces_provisioning_job, and the data sources spaces_space,
// spaces_spaces and spaces_clusters, over the generated client (package
// client), never hand-written HTTP. Its entry point is
// terraform/cmd/terraform-provider-spaces.
package terraform

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"spaces/client"
)

// Provider is the spaces provider; Version is the binary's.
type Provider struct {
	Version string
}

var _ provider.Provider = (*Provider)(nil)

// New is the provider factory providerserver serves.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &Provider{Version: version} }
}

type providerModel struct {
	Server types.String `tfsdk:"server"`
	Token  types.String `tfsdk:"token"`
}

func (p *Provider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "spaces"
	resp.Version = p.Version
}

func (p *Provider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Spaces: the registry of the Kubernetes clusters a platform deploys to.",
		Attributes: map[string]schema.Attribute{
			"server": schema.StringAttribute{Optional: true,
				Description: "The API's base URL (the stack's ApiUrl output); default $SPACES_SERVER, else http://127.0.0.1:8080 (make run)."},
			"token": schema.StringAttribute{Optional: true, Sensitive: true,
				Description: "A bearer token of the org; default $SPACES_TOKEN."},
		},
	}
}

func (p *Provider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	server, token := m.Server.ValueString(), m.Token.ValueString()
	if server == "" {
		server = os.Getenv("SPACES_SERVER")
	}
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	if token == "" {
		token = os.Getenv("SPACES_TOKEN")
	}
	if token == "" {
		resp.Diagnostics.AddError("No token", "Set the provider's token or $SPACES_TOKEN (spaces login keeps one; make token prints one for the local stack).")
		return
	}
	api, err := client.New(server, client.Options{Token: token, UserAgent: "terraform-provider-spaces/" + p.Version})
	if err != nil {
		resp.Diagnostics.AddError("Bad server", err.Error())
		return
	}
	resp.ResourceData, resp.DataSourceData = api, api
}

func (p *Provider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		func() resource.Resource { return &spaceResource{} },
		func() resource.Resource { return &environmentResource{} },
		func() resource.Resource { return &cloudAccountResource{} },
		func() resource.Resource { return &verificationResource{} },
		func() resource.Resource { return &jobResource{} },
	}
}

func (p *Provider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		func() datasource.DataSource { return &spacesDataSource{} },
		func() datasource.DataSource { return &spaceDataSource{} },
		func() datasource.DataSource { return &clustersDataSource{} },
	}
}

// apiOf is the client Configure handed the resources and data sources:
// nil before the provider is configured (the framework calls Configure
// early, during validation, too).
func apiOf(data any, diags *diag.Diagnostics) *client.API {
	if data == nil {
		return nil
	}
	api, ok := data.(*client.API)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("%T", data))
	}
	return api
}
