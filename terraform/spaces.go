package terraform

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"spaces/client"
)

// spacesDataSource is spaces_spaces: the org's spaces, every page, by
// label selector and status.
type spacesDataSource struct {
	api *client.API
}

var _ datasource.DataSourceWithConfigure = (*spacesDataSource)(nil)

type spacesModel struct {
	LabelSelector types.String `tfsdk:"label_selector"`
	Status        types.String `tfsdk:"status"`
	Spaces        []spaceItem  `tfsdk:"spaces"`
}

type spaceItem struct {
	ID     types.String `tfsdk:"id"`
	Name   types.String `tfsdk:"name"`
	Cloud  types.String `tfsdk:"cloud"`
	Status types.String `tfsdk:"status"`
	Labels types.Map    `tfsdk:"labels"`
}

func (d *spacesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_spaces"
}

func (d *spacesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The org's spaces, optionally by label selector and status.",
		Attributes: map[string]schema.Attribute{
			"label_selector": schema.StringAttribute{Optional: true, Description: "A Kubernetes label selector (env=prod,tier in (web,api))."},
			"status":         schema.StringAttribute{Optional: true, Description: "Only spaces of this status: active, inactive or unknown."},
			"spaces": schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"id":     schema.StringAttribute{Computed: true},
				"name":   schema.StringAttribute{Computed: true},
				"cloud":  schema.StringAttribute{Computed: true},
				"status": schema.StringAttribute{Computed: true},
				"labels": schema.MapAttribute{Computed: true, ElementType: types.StringType},
			}}},
		},
	}
}

func (d *spacesDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = apiOf(req.ProviderData, &resp.Diagnostics)
}

func (d *spacesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m spacesModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p := client.ListSpacesParams{}
	if s := m.LabelSelector.ValueString(); s != "" {
		p.LabelSelector = &s
	}
	if s := m.Status.ValueString(); s != "" {
		st := client.StatusFilter(s)
		p.Status = &st
	}
	m.Spaces = []spaceItem{}
	for {
		res, err := client.Result(d.api.ListSpacesWithResponse(ctx, &p))
		if err != nil {
			resp.Diagnostics.AddError("Cannot list spaces", err.Error())
			return
		}
		for _, s := range res.JSON200.Items {
			labels := map[string]string{}
			if s.Labels != nil {
				labels = *s.Labels
			}
			lm, _ := types.MapValueFrom(ctx, types.StringType, labels)
			m.Spaces = append(m.Spaces, spaceItem{ID: types.StringValue(s.Id.String()), Name: types.StringValue(s.Name),
				Cloud: types.StringValue(string(s.Provider)), Status: types.StringValue(string(s.Status)), Labels: lm})
		}
		if p.Cursor = res.JSON200.NextCursor; p.Cursor == nil {
			break
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
