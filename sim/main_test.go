package sim

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain runs the tests with the garbage collector set as cmd/simulate
// sets it (GOGC=400): a simulation allocates briskly and keeps little, and
// collecting four times less often saves about a quarter of the tests'
// CPU time. Tests run in parallel, so a soft limit of 1 GiB keeps the
// process no larger than with Go's default. GOGC and GOMEMLIMIT in the
// environment win.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
	}
	os.Exit(m.Run())
}
