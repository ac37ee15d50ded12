package terraform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"spaces/client"
	"spaces/infra/demo"
	"spaces/infra/local"
)

var seq atomic.Int64

// TestSchemasAreValid: the framework accepts the provider's, the
// resource's and the data source's schemas.
func TestSchemasAreValid(t *testing.T) {
	ctx := context.Background()
	var ps provider.SchemaResponse
	(&Provider{}).Schema(ctx, provider.SchemaRequest{}, &ps)
	var rs resource.SchemaResponse
	(&spaceResource{}).Schema(ctx, resource.SchemaRequest{}, &rs)
	var ds datasource.SchemaResponse
	(&spacesDataSource{}).Schema(ctx, datasource.SchemaRequest{}, &ds)
	for name, d := range map[string]interface{ HasError() bool }{
		"provider": ps.Diagnostics, "resource": rs.Diagnostics, "data source": ds.Diagnostics,
		"resource implementation":    rs.Schema.ValidateImplementation(ctx),
		"data source implementation": ds.Schema.ValidateImplementation(ctx),
	} {
		if d.HasError() {
			t.Errorf("%s: %v", name, d)
		}
	}
	if !rs.Schema.Attributes["cloud"].IsRequired() || !rs.Schema.Attributes["status"].IsComputed() {
		t.Error("the resource's schema lost its required cloud or computed status")
	}
}

// TestSpaceResourceLifecycle runs spaces_space's create, read, update,
// import, drift and delete as the framework calls them, against the local
// stack with the demo's simulated cloud: a registered cluster, its labels
// changed in place, a read after an out-of-band deregistration removing it
// from the state (so the next plan registers it again), a delete of what
// is already gone succeeding; and spaces_spaces finding it by selector.
func TestSpaceResourceLifecycle(t *testing.T) {
	ctx := context.Background()
	prefix := fmt.Sprintf("tf%d%d-", time.Now().UnixNano()%1e6, seq.Add(1))
	st, err := local.Start(ctx, local.Config{
		APIAddr: "127.0.0.1:0", NoEmulatorPort: true, DataDir: t.TempDir(),
		Names: func(id string) string { return prefix + id },
		Log:   slog.New(slog.DiscardHandler), Demo: &demo.Options{},
		Probing: local.ProbingConfig{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	org := "org-" + uuid.NewString()[:8]
	token, err := st.Signer.Mint(org, "terraform", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	// The provider configured as Terraform would.
	p := New("test")()
	var ps provider.SchemaResponse
	p.Schema(ctx, provider.SchemaRequest{}, &ps)
	cfgState := tfsdk.State{Schema: ps.Schema}
	cfgState.Set(ctx, &providerModel{Server: types.StringValue(st.APIURL), Token: types.StringValue(token)})
	var conf provider.ConfigureResponse
	p.Configure(ctx, provider.ConfigureRequest{Config: tfsdk.Config{Schema: ps.Schema, Raw: cfgState.Raw}}, &conf)
	if conf.Diagnostics.HasError() {
		t.Fatal(conf.Diagnostics)
	}
	api := conf.ResourceData.(*client.API)

	// A ready AWS account of the demo.
	acct, err := client.Result(api.CreateCloudAccountWithBodyWithResponse(ctx, nil, "application/json",
		bytes.NewReader([]byte(`{"provider":"aws","name":"prod","connection":{"roleArn":"`+demo.RoleARN+`"}}`))))
	if err != nil {
		t.Fatal(err)
	}
	acctID := acct.JSON201.Id.String()
	body, _ := json.Marshal(map[string]string{"account_id": acctID})
	req, _ := http.NewRequest("POST", st.APIURL+local.DevApplySetupPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusNoContent {
		t.Fatalf("apply setup: %v %v", res, err)
	}
	if _, err := client.Result(api.VerifyCloudAccountWithResponse(ctx, acctID, nil)); err != nil {
		t.Fatal(err)
	}

	r := &spaceResource{}
	r.Configure(ctx, resource.ConfigureRequest{ProviderData: api}, &resource.ConfigureResponse{})
	var rs resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &rs)
	sch := rs.Schema
	strs := func(m map[string]string) types.Map { v, _ := types.MapValueFrom(ctx, types.StringType, m); return v }
	planned := spaceModel{
		ID: types.StringUnknown(), CloudAccountID: types.StringValue(acctID), Cloud: types.StringValue("aws"),
		Config: strs(map[string]string{"region": demo.AWSRegion, "clusterName": "demo-eks-1"}),
		Name:   types.StringUnknown(), Labels: strs(map[string]string{"env": "dev"}),
		Connectivity: types.StringUnknown(), Synthetic: types.BoolUnknown(), Status: types.StringUnknown(),
	}
	plan := tfsdk.Plan{Schema: sch}
	plan.Set(ctx, &planned)
	created := resource.CreateResponse{State: tfsdk.State{Schema: sch, Raw: tftypes.NewValue(sch.Type().TerraformType(ctx), nil)}}
	r.Create(ctx, resource.CreateRequest{Plan: plan}, &created)
	if created.Diagnostics.HasError() {
		t.Fatal(created.Diagnostics)
	}
	var got spaceModel
	created.State.Get(ctx, &got)
	if got.ID.ValueString() == "" || got.Name.ValueString() != "demo-eks-1" || got.Connectivity.ValueString() != "direct" || got.Status.ValueString() != "unknown" {
		t.Fatalf("created: %+v", got)
	}
	id := got.ID.ValueString()

	// Read answers what Create stored: no drift.
	read := func(state tfsdk.State) (tfsdk.State, spaceModel) {
		t.Helper()
		resp := resource.ReadResponse{State: state}
		r.Read(ctx, resource.ReadRequest{State: state}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatal(resp.Diagnostics)
		}
		var m spaceModel
		if !resp.State.Raw.IsNull() {
			resp.State.Get(ctx, &m)
		}
		return resp.State, m
	}
	if _, again := read(created.State); !again.Labels.Equal(got.Labels) || !again.Config.Equal(got.Config) || again.Name != got.Name {
		t.Fatalf("read after create: %+v, want %+v", again, got)
	}

	// Labels change in place.
	next := got
	next.Labels = strs(map[string]string{"env": "prod", "team": "platform"})
	plan2 := tfsdk.Plan{Schema: sch}
	plan2.Set(ctx, &next)
	updated := resource.UpdateResponse{State: created.State}
	r.Update(ctx, resource.UpdateRequest{Plan: plan2, State: created.State}, &updated)
	if updated.Diagnostics.HasError() {
		t.Fatal(updated.Diagnostics)
	}
	updated.State.Get(ctx, &got)
	if got.ID.ValueString() != id || !got.Labels.Equal(next.Labels) {
		t.Fatalf("updated: %+v", got)
	}
	s, err := client.Result(api.GetSpaceWithResponse(ctx, id, nil))
	if err != nil || (*s.JSON200.Labels)["team"] != "platform" {
		t.Fatalf("the API's labels after update: %v %v", s, err)
	}

	// Import by id: Read fills the rest.
	imported := resource.ImportStateResponse{State: tfsdk.State{Schema: sch, Raw: tftypes.NewValue(sch.Type().TerraformType(ctx), nil)}}
	r.ImportState(ctx, resource.ImportStateRequest{ID: id}, &imported)
	if imported.Diagnostics.HasError() {
		t.Fatal(imported.Diagnostics)
	}
	if _, im := read(imported.State); im.Cloud.ValueString() != "aws" || im.CloudAccountID.ValueString() != acctID || !im.Labels.Equal(next.Labels) {
		t.Fatalf("imported: %+v", im)
	}

	// The data source finds it by selector, and not by another.
	d := &spacesDataSource{}
	d.Configure(ctx, datasource.ConfigureRequest{ProviderData: api}, &datasource.ConfigureResponse{})
	var dsch datasource.SchemaResponse
	d.Schema(ctx, datasource.SchemaRequest{}, &dsch)
	find := func(selector string) []spaceItem {
		t.Helper()
		cfg := tfsdk.State{Schema: dsch.Schema}
		cfg.Set(ctx, &spacesModel{LabelSelector: types.StringValue(selector), Status: types.StringNull()})
		resp := datasource.ReadResponse{State: tfsdk.State{Schema: dsch.Schema, Raw: cfg.Raw}}
		d.Read(ctx, datasource.ReadRequest{Config: tfsdk.Config{Schema: dsch.Schema, Raw: cfg.Raw}}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatal(resp.Diagnostics)
		}
		var m spacesModel
		resp.State.Get(ctx, &m)
		return m.Spaces
	}
	if found := find("team=platform"); len(found) != 1 || found[0].ID.ValueString() != id {
		t.Fatalf("spaces_spaces team=platform: %+v", found)
	}
	if found := find("env=dev"); len(found) != 0 {
		t.Fatalf("spaces_spaces env=dev: %+v", found)
	}

	// Deregistered out of band: Read drops it, Delete of it succeeds.
	if _, err := client.Result(api.DeregisterSpaceWithResponse(ctx, id, nil)); err != nil {
		t.Fatal(err)
	}
	if gone, _ := read(updated.State); !gone.Raw.IsNull() {
		t.Fatal("a deregistered space is still in the state after Read")
	}
	var deleted resource.DeleteResponse
	r.Delete(ctx, resource.DeleteRequest{State: updated.State}, &deleted)
	if deleted.Diagnostics.HasError() {
		t.Fatalf("delete of a gone space: %v", deleted.Diagnostics)
	}

	// The next apply registers it again (a new space), and destroy
	// deregisters that one.
	again := resource.CreateResponse{State: tfsdk.State{Schema: sch, Raw: tftypes.NewValue(sch.Type().TerraformType(ctx), nil)}}
	r.Create(ctx, resource.CreateRequest{Plan: plan2}, &again)
	if again.Diagnostics.HasError() {
		t.Fatal(again.Diagnostics)
	}
	again.State.Get(ctx, &got)
	if got.ID.ValueString() == id || !got.Labels.Equal(next.Labels) {
		t.Fatalf("re-created: %+v", got)
	}
	var destroyed resource.DeleteResponse
	r.Delete(ctx, resource.DeleteRequest{State: again.State}, &destroyed)
	if destroyed.Diagnostics.HasError() {
		t.Fatal(destroyed.Diagnostics)
	}
	if _, err := client.Result(api.GetSpaceWithResponse(ctx, got.ID.ValueString(), nil)); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("after destroy the space answers %v, want 404", err)
	}
}
