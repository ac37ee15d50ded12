package terraform

import (
	"context"
	"errors"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"spaces/client"
)

// spaceDataSource is spaces_space as a data source: one space of the org
// by id, with the attributes the resource has.
type spaceDataSource struct {
	api *client.API
}

var _ datasource.DataSourceWithConfigure = (*spaceDataSource)(nil)

func (d *spaceDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_space"
}

func (d *spaceDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "One space of the org, by id.",
		Attributes: map[string]schema.Attribute{
			"id":               schema.StringAttribute{Required: true, Description: "The space's id."},
			"cloud_account_id": schema.StringAttribute{Computed: true, Description: "The cloud account the cluster is in."},
			"cloud":            schema.StringAttribute{Computed: true, Description: "aws, gcp or azure."},
			"config": schema.MapAttribute{Computed: true, ElementType: types.StringType,
				Description: "The cluster's identity at its cloud."},
			"name":         schema.StringAttribute{Computed: true, Description: "Display name."},
			"labels":       schema.MapAttribute{Computed: true, ElementType: types.StringType, Description: "The space's labels."},
			"connectivity": schema.StringAttribute{Computed: true, Description: "direct or agent."},
			"synthetic":    schema.BoolAttribute{Computed: true, Description: "A placeholder that is not a real cluster."},
			"status":       schema.StringAttribute{Computed: true, Description: "active, inactive or unknown."},
		},
	}
}

func (d *spaceDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = apiOf(req.ProviderData, &resp.Diagnostics)
}

func (d *spaceDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var id types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("id"), &id)...)
	if resp.Diagnostics.HasError() {
		return
	}
	res, err := client.Result(d.api.GetSpaceWithResponse(ctx, id.ValueString(), nil))
	if errors.Is(err, client.ErrNotFound) {
		resp.Diagnostics.AddAttributeError(path.Root("id"), "No such space", "The org has no registered space "+id.ValueString()+".")
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the space", err.Error())
		return
	}
	m := fromSpace(ctx, *res.JSON200, types.MapNull(types.StringType))
	if m.Labels.IsNull() {
		m.Labels = types.MapValueMust(types.StringType, nil)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}
