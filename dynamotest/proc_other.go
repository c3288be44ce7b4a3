//go:build !unix

package dynamotest

import "os/exec"

// ownProcessGroup does nothing where there are no process groups.
func ownProcessGroup(*exec.Cmd) {}

// signalGroup kills the JVM: without process groups there is no gentler
// signal to send.
func signalGroup(cmd *exec.Cmd, _ bool) { _ = cmd.Process.Kill() }
