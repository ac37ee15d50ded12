package terraform

import (
	"context"
	"encoding/json"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"spaces/client"
)

// clustersDataSource is spaces_clusters: the clusters a connected cloud
// account can see (the API's cluster picker), each with the config that
// registers it and the org's space already holding it.
type clustersDataSource struct {
	api *client.API
}

var _ datasource.DataSourceWithConfigure = (*clustersDataSource)(nil)

type clustersModel struct {
	CloudAccountID types.String  `tfsdk:"cloud_account_id"`
	Region         types.String  `tfsdk:"region"`
	Clusters       []clusterItem `tfsdk:"clusters"`
}

type clusterItem struct {
	Name              types.String `tfsdk:"name"`
	Location          types.String `tfsdk:"location"`
	Config            types.Map    `tfsdk:"config"`
	Status            types.String `tfsdk:"status"`
	RegisteredSpaceID types.String `tfsdk:"registered_space_id"`
}

func (d *clustersDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_clusters"
}

func (d *clustersDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The clusters a ready cloud account can see, asked of the cloud at read time.",
		Attributes: map[string]schema.Attribute{
			"cloud_account_id": schema.StringAttribute{Required: true, Description: "A ready cloud account of the org."},
			"region": schema.StringAttribute{Optional: true,
				Description: "The AWS region to list (required for aws accounts; gcp and azure list everywhere and refuse it)."},
			"clusters": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"name":     schema.StringAttribute{Computed: true, Description: "The cluster's name in its cloud."},
				"location": schema.StringAttribute{Computed: true, Description: "Its region, zone or location."},
				"config": schema.MapAttribute{Computed: true, ElementType: types.StringType,
					Description: "The config that registers it (spaces_space's config)."},
				"status": schema.StringAttribute{Computed: true, Description: "The cloud's word for its state; null for EKS."},
				"registered_space_id": schema.StringAttribute{Computed: true,
					Description: "The org's space holding it, or null."},
			}}},
		},
	}
}

func (d *clustersDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = apiOf(req.ProviderData, &resp.Diagnostics)
}

func (d *clustersDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m clustersModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p := client.ListCloudAccountClustersParams{}
	if r := m.Region.ValueString(); r != "" {
		p.Region = &r
	}
	res, err := client.Result(d.api.ListCloudAccountClustersWithResponse(ctx, m.CloudAccountID.ValueString(), &p))
	if err != nil {
		resp.Diagnostics.AddError("Cannot list the account's clusters", err.Error())
		return
	}
	m.Clusters = []clusterItem{}
	for _, c := range res.JSON200.Items {
		raw, _ := c.Config.MarshalJSON()
		cfg := map[string]string{}
		_ = json.Unmarshal(raw, &cfg)
		item := clusterItem{Name: types.StringValue(c.Name), Location: types.StringValue(c.Location),
			Status: types.StringPointerValue(c.Status), RegisteredSpaceID: types.StringNull()}
		item.Config, _ = types.MapValueFrom(ctx, types.StringType, cfg)
		if c.RegisteredSpaceId != nil {
			item.RegisteredSpaceID = types.StringValue(c.RegisteredSpaceId.String())
		}
		m.Clusters = append(m.Clusters, item)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
