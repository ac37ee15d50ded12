// Command proberlike links what a prober with every minter links: client-go
// (kubeprobe), the DynamoDB store and the three clouds' SDKs (shared/mint),
// to measure binary size and memory. It is not deployed.
package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/aws/aws-sdk-go-v2/aws"

	"spaces/shared/awsclient"
	"spaces/shared/dynamostore"
	"spaces/shared/kubecred"
	"spaces/shared/kubeprobe"
	"spaces/shared/mint"
	"spaces/shared/mint/aks"
	"spaces/shared/mint/eks"
	"spaces/shared/mint/gke"
	"spaces/shared/space"
)

func main() {
	store := dynamostore.New(awsclient.DynamoDB(aws.Config{}, "http://127.0.0.1:1"), "t")
	m := &mint.Minter{Grants: store, Accounts: store, Providers: map[space.Provider]mint.Provider{
		space.AWS: eks.New(eks.Config{}), space.GCP: gke.New(gke.Config{}), space.Azure: aks.New(aks.Config{}),
	}}
	_, err := m.Mint(context.Background(), space.Space{Synthetic: true})
	o := (&kubeprobe.Prober{}).Probe(context.Background(), kubecred.Credentials{})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("mint: %v\nprobe: %s\nheap in use: %d KiB, sys: %d KiB\n", err, o.Reason, ms.HeapInuse>>10, ms.Sys>>10)
}
