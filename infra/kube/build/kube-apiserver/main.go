// Command kube-apiserver is upstream Kubernetes' kube-apiserver, built from
// the Go module proxy (k8s.io/kubernetes pinned in ../go.mod). It is a copy of
// k8s.io/kubernetes/cmd/kube-apiserver/apiserver.go: the upstream main
// package cannot be built from outside its module because of its replace
// directives, so this module re-creates it around the same app package.
// Spaces uses it only in end-to-end tests (see infra/kubetest).
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	command := app.NewAPIServerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
