// Command proberbase is proberlike without the minters: client-go and the
// store only, the baseline for the minters' size.
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
)

func main() {
	store := dynamostore.New(awsclient.DynamoDB(aws.Config{}, "http://127.0.0.1:1"), "t")
	_, err := store.HasGrant(context.Background(), "o", "s")
	o := (&kubeprobe.Prober{}).Probe(context.Background(), kubecred.Credentials{})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("grant: %v\nprobe: %s\nheap in use: %d KiB, sys: %d KiB\n", err != nil, o.Reason, ms.HeapInuse>>10, ms.Sys>>10)
}
