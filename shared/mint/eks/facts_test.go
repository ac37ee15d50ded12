package eks

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"spaces/shared/space"
)

// The region is the ARN's; without a readable ARN, the region asked.
func TestFacts(t *testing.T) {
	for _, tc := range []struct {
		name string
		cl   ekstypes.Cluster
		want space.ClusterFacts
	}{
		{"ARN", ekstypes.Cluster{Arn: aws.String("arn:aws:eks:us-east-2:123456789012:cluster/a"), Version: aws.String("1.31")},
			space.ClusterFacts{Location: "us-east-2", KubernetesVersion: "1.31"}},
		{"no ARN", ekstypes.Cluster{Version: aws.String("1.30")}, space.ClusterFacts{Location: "eu-west-1", KubernetesVersion: "1.30"}},
		{"bad ARN, no version", ekstypes.Cluster{Arn: aws.String("cluster/a")}, space.ClusterFacts{Location: "eu-west-1"}},
	} {
		if got := facts(&tc.cl, "eu-west-1"); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
