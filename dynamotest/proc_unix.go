//go:build unix

package dynamotest

import (
	"os/exec"
	"syscall"
)

// signalGroup sends SIGTERM (or SIGKILL) to the JVM's process group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
