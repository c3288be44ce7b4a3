package dynamotest

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup puts the JVM in a process group of its own, killed when
// the test binary dies without stopping it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
