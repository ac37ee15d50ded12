package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"spaces/shared/space"
)

// clusterBinding names the cluster the agent runs in (space.ClusterBinding):
// the kube-system namespace's UID, read with the namespaces list the agent
// already has (a field selector, no get), and the SHA-256 of the first
// certificate of its API server's CA bundle (the in-cluster
// configuration's). Spaces binds the credentials to it at the exchange and
// refuses leases that name another. Nil when either cannot be read (the
// agent then runs unbound, as an older one does); logged.
func (cfg *Config) clusterBinding(ctx context.Context) *space.ClusterBinding {
	if cfg.Kube == nil || cfg.KubeConfig == nil {
		return nil
	}
	list, err := cfg.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kube-system"})
	if err != nil || len(list.Items) != 1 || list.Items[0].UID == "" {
		cfg.Log.Warn("cannot read the kube-system namespace's UID; the credential is not bound to this cluster", "error", errString(err))
		return nil
	}
	ca := cfg.KubeConfig.TLSClientConfig.CAData
	if len(ca) == 0 && cfg.KubeConfig.TLSClientConfig.CAFile != "" {
		if ca, err = os.ReadFile(cfg.KubeConfig.TLSClientConfig.CAFile); err != nil {
			cfg.Log.Warn("cannot read the API server's CA; the credential is not bound to this cluster", "error", err.Error())
			return nil
		}
	}
	block, _ := pem.Decode(ca)
	if block == nil || block.Type != "CERTIFICATE" {
		cfg.Log.Warn("no API server CA certificate; the credential is not bound to this cluster")
		return nil
	}
	sum := sha256.Sum256(block.Bytes)
	return &space.ClusterBinding{KubeSystemUID: string(list.Items[0].UID), CASHA256: hex.EncodeToString(sum[:])}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
