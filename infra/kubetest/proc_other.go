//go:build !linux

package kubetest

import "os/exec"

// dieWithParent has no portable equivalent outside Linux: the cleanups
// registered by Start are what stop the processes there.
func dieWithParent(*exec.Cmd) {}
