// Command etcd is upstream etcd (go.etcd.io/etcd/server/v3, pinned in go.mod),
// built from the Go module proxy. It does what etcd's own main package does:
// hand the command line to etcdmain. It lives in its own module so that its
// dependency versions never move those of kube-apiserver (../go.mod).
// Spaces uses it only in end-to-end tests (see infra/kubetest).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
