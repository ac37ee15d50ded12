package aks

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"

	"spaces/shared/space"
)

// The version running (currentKubernetesVersion) wins over the one asked
// for; the location is ARM's, never the resource group.
func TestFacts(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name string
		mc   armcontainerservice.ManagedCluster
		want space.ClusterFacts
	}{
		{"current", armcontainerservice.ManagedCluster{Location: s("westeurope"), Properties: &armcontainerservice.ManagedClusterProperties{
			KubernetesVersion: s("1.31"), CurrentKubernetesVersion: s("1.31.2")}}, space.ClusterFacts{Location: "westeurope", KubernetesVersion: "1.31.2"}},
		{"asked only", armcontainerservice.ManagedCluster{Location: s("northeurope"), Properties: &armcontainerservice.ManagedClusterProperties{
			KubernetesVersion: s("1.30.7")}}, space.ClusterFacts{Location: "northeurope", KubernetesVersion: "1.30.7"}},
		{"no properties", armcontainerservice.ManagedCluster{Location: s("eastus")}, space.ClusterFacts{Location: "eastus"}},
	} {
		if got := facts(tc.mc); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
