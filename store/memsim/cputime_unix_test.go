//go:build unix

package memsim_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time the test process has used (all threads,
// the garbage collector's included). Benchmarks report it per operation,
// which stays meaningful when other work shares the machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
