package sim

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// FaultPlan is a composable, seeded fault plan over memsim's injectors.
// Faults are injected from Start until the end of the run's Duration;
// the tail after it is fault-free (the liveness phase). Every probability
// is per request; every draw comes from the run's seed.
type FaultPlan struct {
	// Start is when faults begin (virtual time; 0 or less means 1 s).
	Start time.Duration
	// Throttle storms: every StormEvery, for StormLength, each request is
	// throttled with probability StormP. The first storm starts 2 s after
	// Start; StormEvery 0 or less makes it the only one, and StormLength
	// or StormP 0 means no storm.
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

	// ExpiryDelay turns on DynamoDB's time to live: every item whose ttl
	// (Unix seconds) has passed is deleted, one by one, each at a delay
	// drawn uniformly in [0, ExpiryDelay] after its expiry (DynamoDB takes
	// minutes to days), so that a bucket's shards go in no particular
	// order. Never earlier: an item whose ttl moved on meanwhile is
	// spared. The deletions are change-stream REMOVE records that no client
	// caused. Buckets expire only after an idle time longer than their TTL
	// (an hour or more), so a workload needs a duty cycle with long idle
	// periods (DutyPeriod) for expiry to happen. 0: nothing expires.
	ExpiryDelay time.Duration
	// PCancel is the probability that the caller of an acquire cancels its
	// context during the call: after N of the acquire's store calls (N
	// drawn from 0 to 3), either between two calls (the next one sees the
	// cancelled context) or while the N-th is in flight (its answer is the
	// context's error, outcome unknown for a write: it may have applied).
	// Such an acquire asks for the fail-open policy: whatever happens, a
	// cancelled caller must get the context's error (or a refusal), never
	// a lease.
	PCancel float64
	// PUndoFail is the probability that a cascade's compensation write
	// (the refund of the side that was charged when the other side was
	// refused or failed) fails: throttled, 5xx before or after apply, or
	// its answer lost, in equal parts.
	PUndoFail float64
}

// DefaultFaults is the plan of the faults scenario and of -faults: a
// throttle storm of 2 s every 20 s at 50 % (the first 2 s after Start), and 0.5 % each of 5xx before
// apply, 5xx after apply, lost answers and conflicts, plus 0.5 % latency
// spikes (median 200 ms, p99 1.5 s: some pass the 1 s timeout); 1 % of
// acquires cancelled by their caller, 20 % of cascade compensations
// failed, and expired items deleted within 2 h of their expiry.
func DefaultFaults() FaultPlan {
	return FaultPlan{
		Start:      time.Second,
		StormEvery: 20 * time.Second, StormLength: 2 * time.Second, StormP: 0.5,
		P5xxBefore: 0.005, P5xxAfter: 0.005, PLost: 0.005, PConflict: 0.005,
		PSpike: 0.005, Spike: Latency{Median: 200 * time.Millisecond, P99: 1500 * time.Millisecond},
		ExpiryDelay: 2 * time.Hour, PCancel: 0.01, PUndoFail: 0.2,
	}
}

var writeOps = []memsim.OpKind{memsim.OpPut, memsim.OpUpdate, memsim.OpDelete, memsim.OpTransactWrite}

// faultState is the plan at work: the fault window, and what the scheduler
// tells the injectors about the request being applied.
type faultState struct {
	plan     FaultPlan
	from, to int64 // the fault window (virtual ns)
	// undo: the request being applied is a cascade's compensation write;
	// bypass: it is the TTL process's delete, which no fault touches.
	undo, bypass bool
	// undoWrites counts compensation writes in the fault window,
	// undoFaults those the plan failed.
	undoWrites, undoFaults uint64
}

// undoFaultKinds are what a failed compensation write meets, in equal
// parts: refused (the limiter may retry), or of unknown outcome.
var undoFaultKinds = [...]memsim.Fault{memsim.FaultThrottle, memsim.Fault5xxBeforeApply, memsim.Fault5xxAfterApply, memsim.FaultLostResponse}

// injector builds the plan, seeding each random injector from rng, active
// in [Start, end) (virtual ns; base is the Unix ns of virtual time 0), and
// its description. It returns a nil injector when the plan injects nothing
// into requests.
func (p FaultPlan) injector(rng *rand.Rand, base, end int64, st *faultState) (memsim.Injector, string) {
	start := int64(orDefault(p.Start, time.Second))
	st.plan, st.from, st.to = p, start, end
	if start >= end {
		return nil, ""
	}
	from, to := time.Unix(0, base+start).UTC(), time.Unix(0, base+end).UTC()
	var parts []memsim.Injector
	if p.PSpike > 0 && p.Spike.Median > 0 {
		parts = append(parts, spike(p.PSpike, p.Spike, rng.Uint64()))
	}
	if p.StormP > 0 && p.StormLength > 0 {
		parts = append(parts, memsim.ThrottleStorm(from.Add(2*time.Second), p.StormEvery, p.StormLength, p.StormP, rng.Uint64()))
	}
	for _, f := range []struct {
		p     float64
		ops   []memsim.OpKind // nil: every request
		fault memsim.Fault
	}{{p.P5xxBefore, writeOps, memsim.Fault5xxBeforeApply}, {p.P5xxAfter, writeOps, memsim.Fault5xxAfterApply}, {p.PLost, nil, memsim.FaultLostResponse},
		{p.PConflict, []memsim.OpKind{memsim.OpUpdate, memsim.OpPut, memsim.OpTransactWrite}, memsim.FaultConflict}} {
		if !(f.p > 0) {
			continue
		}
		inj := memsim.Probability(f.p, rng.Uint64(), f.fault)
		if f.ops != nil {
			inj = memsim.OnOps(f.ops, inj)
		}
		parts = append(parts, inj)
	}
	if p.PUndoFail > 0 {
		// First in the chain: a compensation write meets its own fault
		// rate, then the others like any write.
		parts = append([]memsim.Injector{undoFail(p.PUndoFail, rng.Uint64(), st)}, parts...)
	}
	var desc []string
	var inj memsim.Injector
	if len(parts) > 0 {
		plan := memsim.During(from, to, memsim.Chain(parts...))
		desc = append(desc, plan.String())
		inj = memsim.Func(plan.String(), func(op memsim.Op) memsim.Decision {
			if st.bypass {
				return memsim.Decision{}
			}
			return plan.Inject(op)
		})
	}
	if p.PCancel > 0 {
		desc = append(desc, "cancel(p="+strconv.FormatFloat(p.PCancel, 'g', -1, 64)+" after 0-3 calls)")
	}
	if p.ExpiryDelay > 0 {
		desc = append(desc, "expiry(within="+p.ExpiryDelay.String()+")")
	}
	return inj, strings.Join(desc, " ")
}

// undoFail fails a compensation write (the scheduler marks it) with
// probability p, from its own seeded source.
func undoFail(p float64, seed uint64, st *faultState) memsim.Injector {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	name := "undo-fail(p=" + strconv.FormatFloat(p, 'g', -1, 64) + " seed=" + strconv.FormatUint(seed, 10) + ")"
	return memsim.Func(name, func(memsim.Op) memsim.Decision {
		if !st.undo {
			return memsim.Decision{}
		}
		st.undoWrites++
		if r.Float64() < p {
			st.undoFaults++
			return memsim.Decision{Fault: undoFaultKinds[r.IntN(len(undoFaultKinds))]}
		}
		return memsim.Decision{}
	})
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
