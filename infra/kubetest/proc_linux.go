package kubetest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the child if the test binary dies
// without running its cleanups (a panic, a -timeout, a SIGKILL), so no etcd or
// kube-apiserver outlives the test that started it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
