package terraform

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

var seq atomic.Int64

// TestSchemasAreValid: the framework accepts the provider's and every
// resource's and data source's schema, and the provider serves each.
func TestSchemasAreValid(t *testing.T) {
	ctx := context.Background()
	p := New("test")()
	var ps provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &ps)
	if ps.Diagnostics.HasError() {
		t.Errorf("provider: %v", ps.Diagnostics)
	}
	names := map[string]bool{}
	for _, r := range p.Resources(ctx) {
		res := r()
		var md resource.MetadataResponse
		res.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: "spaces"}, &md)
		var rs resource.SchemaResponse
		res.Schema(ctx, resource.SchemaRequest{}, &rs)
		if rs.Diagnostics.HasError() || rs.Schema.ValidateImplementation(ctx).HasError() {
			t.Errorf("resource %s: %v %v", md.TypeName, rs.Diagnostics, rs.Schema.ValidateImplementation(ctx))
		}
		names["resource "+md.TypeName] = true
	}
	for _, d := range p.DataSources(ctx) {
		ds := d()
		var md datasource.MetadataResponse
		ds.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: "spaces"}, &md)
		var dsr datasource.SchemaResponse
		ds.Schema(ctx, datasource.SchemaRequest{}, &dsr)
		if dsr.Diagnostics.HasError() || dsr.Schema.ValidateImplementation(ctx).HasError() {
			t.Errorf("data source %s: %v %v", md.TypeName, dsr.Diagnostics, dsr.Schema.ValidateImplementation(ctx))
		}
		names["data "+md.TypeName] = true
	}
	for _, want := range []string{"resource spaces_space", "resource spaces_environment", "resource spaces_cloud_account", "resource spaces_cloud_account_verification", "resource spaces_provisioning_job", "data spaces_space", "data spaces_spaces", "data spaces_clusters"} {
		if !names[want] {
			t.Errorf("the provider does not serve %s (serves %v)", want, names)
		}
	}
}
