//go:build unix && !linux

package dynamotest

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup puts the JVM in a process group of its own. (Only Linux
// can also have it killed when the test binary dies.)
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
