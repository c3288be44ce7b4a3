package memsim_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store/internal/linearize"
	"github.com/shardlimit/limiter/store/memsim"
)

// TestLinearizable records concurrent histories of random calls on a few
// keys (8 clients, faults injected: lost answers, 5xx before and after
// apply, conflicts, throttles) and checks each against the sequential
// model. make linearize
// runs the long campaign.
func TestLinearizable(t *testing.T) {
	histories, ops := linearize.Budget(t, 10, 80)
	var total linearize.Stats
	for h := range histories {
		seed := uint64(h + 1)
		plan := memsim.Chain(
			memsim.Probability(0.015, seed, memsim.FaultLostResponse),
			memsim.Probability(0.0075, seed+1, memsim.Fault5xxAfterApply),
			memsim.Probability(0.0075, seed+2, memsim.Fault5xxBeforeApply),
			memsim.Probability(0.01, seed+3, memsim.FaultConflict),
			memsim.Probability(0.005, seed+4, memsim.FaultThrottle),
		)
		// The hook yields before every request is applied, so that calls
		// of different clients overlap more than memsim's speed allows.
		yield := memsim.WithHook(func(context.Context, memsim.Op) { runtime.Gosched() })
		st := memsim.New(memsim.WithPartitionLimits(0, 0), memsim.WithFaults(plan), memsim.WithSharedResults(h%2 == 0), yield)
		s := linearize.Check(t, st, linearize.Config{Clients: 8, Ops: ops, Seed: seed, NS: "m" + strconv.Itoa(h), Groups: 4}, time.Minute)
		total.Ops += s.Ops
		total.Unknown += s.Unknown
		total.Refused += s.Refused
	}
	t.Logf("linearizable: %d histories, %d operations (%d with unknown outcome, %d refused)", histories, total.Ops, total.Unknown, total.Refused)
}
