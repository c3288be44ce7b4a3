package sim

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// FaultPlan is a composable, seeded fault plan over memsim's injectors.
// Faults are injected from Start until the end of the run's Duration;
// the tail after it is fault-free (the liveness phase). Every probability
// is per request; the seeds come from the run's seed.
type FaultPlan struct {
	// Start is when faults begin (virtual time; default 1 s).
	Start time.Duration
	// Throttle storms: every StormEvery, for StormLength, each request is
	// throttled with probability StormP.
	StormEvery, StormLength time.Duration
	StormP                  float64
	// Server errors on writes, before or after the write applied (the
	// client cannot tell: outcome unknown either way).
	P5xxBefore, P5xxAfter float64
	// PLost loses the answer after the request applied: the client waits
	// for its timeout.
	PLost float64
	// PConflict answers a single-item write or a transaction with a
	// transaction conflict.
	PConflict float64
	// PSpike delays a request by a duration drawn from Spike; a delay that
	// passes the client's timeout fails the request unapplied (a timeout).
	PSpike float64
	Spike  Latency
}

// DefaultFaults is the plan of the faults scenario and of -faults: a
// throttle storm of 2 s every 20 s at 50 % (the first 2 s after Start), and 0.5 % each of 5xx before
// apply, 5xx after apply, lost answers and conflicts, plus 0.5 % latency
// spikes (median 200 ms, p99 1.5 s: some pass the 1 s timeout).
func DefaultFaults() FaultPlan {
	return FaultPlan{
		Start:      time.Second,
		StormEvery: 20 * time.Second, StormLength: 2 * time.Second, StormP: 0.5,
		P5xxBefore: 0.005, P5xxAfter: 0.005, PLost: 0.005, PConflict: 0.005,
		PSpike: 0.005, Spike: Latency{Median: 200 * time.Millisecond, P99: 1500 * time.Millisecond},
	}
}

var writeOps = []memsim.OpKind{memsim.OpPut, memsim.OpUpdate, memsim.OpDelete, memsim.OpTransactWrite}

// injector builds the plan, seeding each random injector from rng, active
// in [Start, end) (virtual ns; base is the Unix ns of virtual time 0).
func (p FaultPlan) injector(rng *rand.Rand, base, end int64) memsim.Injector {
	start := int64(p.Start)
	if start <= 0 {
		start = int64(time.Second)
	}
	if start >= end {
		return nil
	}
	from, to := time.Unix(0, base+start).UTC(), time.Unix(0, base+end).UTC()
	var parts []memsim.Injector
	if p.PSpike > 0 && p.Spike.Median > 0 {
		parts = append(parts, spike(p.PSpike, p.Spike, rng.Uint64()))
	}
	if p.StormP > 0 && p.StormLength > 0 {
		parts = append(parts, memsim.ThrottleStorm(from.Add(2*time.Second), p.StormEvery, p.StormLength, p.StormP, rng.Uint64()))
	}
	if p.P5xxBefore > 0 {
		parts = append(parts, memsim.OnOps(writeOps, memsim.Probability(p.P5xxBefore, rng.Uint64(), memsim.Fault5xxBeforeApply)))
	}
	if p.P5xxAfter > 0 {
		parts = append(parts, memsim.OnOps(writeOps, memsim.Probability(p.P5xxAfter, rng.Uint64(), memsim.Fault5xxAfterApply)))
	}
	if p.PLost > 0 {
		parts = append(parts, memsim.Probability(p.PLost, rng.Uint64(), memsim.FaultLostResponse))
	}
	if p.PConflict > 0 {
		parts = append(parts, memsim.OnOps([]memsim.OpKind{memsim.OpUpdate, memsim.OpPut, memsim.OpTransactWrite},
			memsim.Probability(p.PConflict, rng.Uint64(), memsim.FaultConflict)))
	}
	if len(parts) == 0 {
		return nil
	}
	return memsim.During(from, to, memsim.Chain(parts...))
}

// spike delays a fraction of requests by a log-normal duration, from its
// own seeded source.
func spike(p float64, l Latency, seed uint64) memsim.Injector {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	d := l.compile()
	name := "spike(p=" + strconv.FormatFloat(p, 'g', -1, 64) + " median=" + l.Median.String() + " p99=" + l.P99.String() +
		" seed=" + strconv.FormatUint(seed, 10) + ")"
	return memsim.Func(name, func(memsim.Op) memsim.Decision {
		if r.Float64() < p {
			return memsim.Decision{Delay: time.Duration(d.draw(r))}
		}
		return memsim.Decision{}
	})
}
