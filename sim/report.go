package sim

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Report is the outcome of one run. Its JSON form is documented in
// docs/simulation.md. Every field is a function of the configuration and
// the seed, except WallMs, which the caller fills in (the simulator never
// reads the wall clock).
type Report struct {
	// Scenario is the scenario's name ("custom" for a Config.Workload).
	Scenario string `json:"scenario"`
	// Seed is the run's seed.
	Seed uint64 `json:"seed"`
	// Writers counts the simulated clients (the liveness probe and actors
	// not counted).
	Writers int `json:"writers"`
	// Rate is the offered acquires per second, all writers together.
	Rate float64 `json:"rate"`
	// SimDurationMs is the simulated time, fault-free tail included;
	// TailMs the tail alone. Both in milliseconds.
	SimDurationMs int64 `json:"sim_duration_ms"`
	TailMs        int64 `json:"tail_ms"`
	// WallMs is the run's wall time in milliseconds, filled in by the
	// caller (cmd/simulate); 0 otherwise.
	WallMs int64 `json:"wall_ms"`

	// Offered counts the acquires the workload offered (open-loop
	// arrivals), started or not.
	Offered uint64 `json:"offered"`
	// Backlog is the part of Offered the writers never started: they fell
	// behind (every acquire of a writer waits for the previous one).
	Backlog uint64 `json:"backlog"`
	// Acquires counts the Acquire calls that finished, first tries and
	// retries: it can exceed Offered.
	Acquires uint64 `json:"acquires"`
	// Admitted counts the acquires that returned a lease (a fail-open
	// lease counts as Unavailable).
	Admitted uint64 `json:"admitted"`
	// Rejected counts the acquires refused with a
	// *limiter.RateLimitedError.
	Rejected uint64 `json:"rejected"`
	// Throttled counts store requests (not acquires) answered with a
	// throttle: a partition over its ceiling, or an injected throttle.
	Throttled uint64 `json:"throttled"`
	// Unavailable counts the acquires that failed with a store error
	// (fail-closed) or whose caller cancelled them.
	Unavailable uint64 `json:"unavailable"`
	// FalseRejections counts rejections whose RateLimitedError shows no
	// exceeded limit (the limiter gave up after losing races).
	FalseRejections uint64 `json:"false_rejections"`
	// Adjusts and Rollbacks count the finished Lease.Adjust and
	// Lease.Rollback calls.
	Adjusts   uint64 `json:"adjusts"`
	Rollbacks uint64 `json:"rollbacks"`

	// RoundTrips counts the clients' store calls (a WriteConcurrently
	// counts once); StoreRequests the requests the store saw (each write
	// of a WriteConcurrently is one).
	RoundTrips    uint64 `json:"round_trips"`
	StoreRequests uint64 `json:"store_requests"`
	// WCU and RCU are the write and read capacity units consumed (index
	// writes and failed conditions included; setup writes and the time
	// to live's deletions excluded).
	WCU float64 `json:"wcu"`
	RCU float64 `json:"rcu"`

	// Crashes counts writer processes that crashed (Workload.CrashEvery).
	Crashes uint64 `json:"crashes,omitempty"`
	// Cancelled counts acquires whose caller cancelled its context and
	// whose limiter had to notice (FaultPlan.PCancel).
	Cancelled uint64 `json:"cancelled,omitempty"`
	// Bypassed counts acquires admitted without a write because their
	// scope's mode is admit, Disabled those refused because it is refuse
	// (limiter.ErrDisabled; not in Rejected).
	Bypassed uint64 `json:"bypassed,omitempty"`
	Disabled uint64 `json:"disabled,omitempty"`
	// WouldRefuse counts admitted acquires that a shadow limit would have
	// refused (limiter.Event.WouldRefuse).
	WouldRefuse uint64 `json:"would_refuse,omitempty"`
	// UndoWrites counts cascade compensation writes in the fault window,
	// UndoFaults those the fault plan failed (FaultPlan.PUndoFail).
	UndoWrites uint64 `json:"undo_writes,omitempty"`
	UndoFaults uint64 `json:"undo_faults,omitempty"`
	// Expired counts items the time to live deleted
	// (FaultPlan.ExpiryDelay), and ShardZeroRecreated the shard 0 items
	// created again at more than one shard, after shard 0 expired while
	// other shards of its bucket lived on.
	Expired            uint64 `json:"expired,omitempty"`
	ShardZeroRecreated int    `json:"shard0_recreated,omitempty"`
	// ShardCountFinal is the largest shard count on a shard 0 item at the
	// end of the run.
	ShardCountFinal int64 `json:"shard_count_final"`
	// ShardDoublings counts the shard-count doublings the change stream
	// showed.
	ShardDoublings int `json:"shard_doublings"`
	// Paths counts the acquires by the last write path the limiter took
	// (limiter.Path names).
	Paths map[string]uint64 `json:"paths"`
	// PathCosts is, per last path taken, what those acquires cost.
	PathCosts map[string]PathCost `json:"path_costs"`
	// HotPath is what the acquires admitted by one write and nothing else
	// cost: one round trip (the speculative write, or a lone writer's full
	// write), no read (their limits and entity were cached).
	HotPath PathCost `json:"hot_path"`
	// LivenessChecks counts the retries invariant 7 judged.
	LivenessChecks int `json:"liveness_checks"`
	// SkewMs is the largest clock skew of a client, in milliseconds.
	SkewMs int64 `json:"skew_ms"`
	// Faults is the fault plan as it prints itself, or "none".
	Faults string `json:"faults"`
	// LimitRate is the acquire rate the limits admit at most, all
	// buckets together, as the workload states it (0: not stated).
	LimitRate float64 `json:"limit_rate"`
	// AfterWarmUp sums the timeline after the warm-up
	// (Workload.WarmUp).
	AfterWarmUp Window `json:"after_warmup"`

	// Violations lists every broken invariant, at most 20 per invariant
	// followed by a count of the rest; empty when the run is OK.
	Violations []Violation `json:"violations"`
	// TraceHash is a 64-bit hash, in hex, of every scheduled event: the
	// same configuration and seed give the same hash (invariant 8).
	TraceHash string `json:"trace_hash"`
	// TimelineStepMs is the timeline's step in milliseconds: 1000, longer
	// for runs over an hour (at most about 3600 entries).
	TimelineStepMs int64 `json:"timeline_step_ms"`
	// Timeline has one entry per step, from virtual time 0.
	Timeline []Second `json:"timeline"`
}

// PathCost is what the acquires that ended on one write path cost: how
// many there were and were admitted, their round trips, write units and
// read units (the reads of stored limits and entities not cached).
type PathCost struct {
	Acquires   uint64  `json:"acquires"`    // acquires that ended on the path
	Admitted   uint64  `json:"admitted"`    // those that were admitted
	RoundTrips uint64  `json:"round_trips"` // their store calls
	WCU        float64 `json:"wcu"`         // their write capacity units
	RCU        float64 `json:"rcu"`         // their read capacity units
}

func (ps pathStat) cost() PathCost {
	return PathCost{Acquires: ps.n, Admitted: ps.admitted, RoundTrips: ps.roundTrips, WCU: ps.wcu, RCU: ps.rcu}
}

// Second is one timeline entry: what happened during one step (a
// simulated second, or longer for runs over an hour) starting at TMs.
type Second struct {
	TMs         int64  `json:"t_ms"`        // the step's start, virtual ms
	Offered     uint64 `json:"offered"`     // acquires offered, by arrival time
	Attempts    uint64 `json:"attempts"`    // acquires started
	Admitted    uint64 `json:"admitted"`    // acquires admitted, by end time
	Rejected    uint64 `json:"rejected"`    // acquires refused, by end time
	Throttled   uint64 `json:"throttled"`   // store requests throttled, by apply time
	Unavailable uint64 `json:"unavailable"` // acquires unavailable, by end time
	ShardCount  int64  `json:"shard_count"` // the largest shard count at the step's end
}

// Window sums the timeline from FromMs (the end of the warm-up) to the end
// of the run.
type Window struct {
	// FromMs is the window's start, virtual ms.
	FromMs int64 `json:"from_ms"`
	// The counts are the sums of the Second fields of the same names.
	Offered     uint64 `json:"offered"`
	Attempts    uint64 `json:"attempts"`
	Admitted    uint64 `json:"admitted"`
	Rejected    uint64 `json:"rejected"`
	Throttled   uint64 `json:"throttled"`
	Unavailable uint64 `json:"unavailable"`
	// ThrottledPc is Throttled per 100 Attempts; AdmittedPc is Admitted
	// per 100 Offered (0 when the divisor is 0).
	ThrottledPc float64 `json:"throttled_pct_of_attempts"`
	AdmittedPc  float64 `json:"admitted_pct_of_offered"`
}

// OK reports whether no invariant was violated (false for a nil Report).
func (r *Report) OK() bool { return r != nil && len(r.Violations) == 0 }

// misuse is the report of a Run that simulated nothing because the Sim
// could not run.
func misuse(detail string) *Report {
	return &Report{Violations: []Violation{{Invariant: InvHarness, Detail: detail}}}
}

func (s *Sim) report(items []store.Item) *Report {
	wl := s.wl
	tot := s.st.Totals().Consumed
	r := &Report{
		Scenario: wl.name, Seed: s.cfg.Seed, Writers: wl.Writers, Rate: wl.Rate,
		SimDurationMs: s.end / int64(time.Millisecond), TailMs: (s.end - s.faultEnd) / int64(time.Millisecond),
		Offered: s.stats.offered, Backlog: s.stats.backlog, Acquires: s.stats.acquires, Admitted: s.stats.admitted, Rejected: s.stats.rejected,
		Throttled: s.stats.throttled, Unavailable: s.stats.unavailable, FalseRejections: s.stats.falseRejections, Adjusts: s.stats.adjusts, Rollbacks: s.stats.rollbacks,
		RoundTrips: s.stats.roundTrips, StoreRequests: s.stats.storeCalls,
		WCU: tot.WriteUnits - s.setupCap.WriteUnits, RCU: tot.ReadUnits - s.setupCap.ReadUnits,
		Paths: map[string]uint64{}, SkewMs: int64(wl.Skew / time.Millisecond), Faults: cmp.Or(wl.faultDesc, "none"), LimitRate: wl.LimitRate,
		TraceHash: fmt.Sprintf("%016x", s.hash), TimelineStepMs: s.step / int64(time.Millisecond),
		Violations: []Violation{}, Crashes: s.stats.crashes, Cancelled: s.stats.cancelled,
		Bypassed: s.stats.bypassed, Disabled: s.stats.disabled, WouldRefuse: s.stats.wouldRefuse,
		UndoWrites: s.faults.undoWrites, UndoFaults: s.faults.undoFaults, HotPath: s.stats.hot.cost(),
		PathCosts: map[string]PathCost{}, ShardCountFinal: 1, ShardDoublings: s.stats.doublingsSeen,
	}
	if s.sweep != nil {
		// DynamoDB's deletions at expiry are free: leave them out.
		r.Expired = s.sweep.deleted
		r.WCU -= s.sweep.consumed.WriteUnits
		r.RCU -= s.sweep.consumed.ReadUnits
	}
	for p, ps := range s.stats.paths {
		if ps.n > 0 {
			name := limiter.Path(p).String()
			r.Paths[name] = ps.n
			r.PathCosts[name] = ps.cost()
		}
	}
	for _, it := range items {
		pk, _ := it.Str(store.AttrPK)
		if ref, ok := keys.ParseBucketPK(pk); ok && ref.Shard == 0 {
			if n, ok := it.Int("shard_count"); ok && n > r.ShardCountFinal {
				r.ShardCountFinal = n
			}
		}
	}
	if s.chk != nil {
		r.ShardDoublings = s.chk.Doublings
		r.ShardZeroRecreated = s.chk.ShardZeroRecreated
		r.LivenessChecks = s.chk.LivenessChecks
		r.Violations = append(r.Violations, s.chk.Violations()...)
		if wl.Probe && s.chk.LivenessChecks == 0 && s.end-s.faultEnd-s.model.TailSettle >= int64(3*time.Second) {
			r.Violations = append(r.Violations, Violation{Invariant: InvLiveness,
				Detail: "the probe made no liveness check in the fault-free tail"})
		}
	}
	for int64(len(s.tl))*s.step < s.end {
		s.second(int64(len(s.tl)) * s.step)
	}
	r.Timeline = s.tl
	w := Window{FromMs: int64(orDefault(wl.WarmUp, min(30*time.Second, wl.Duration/4)) / time.Millisecond)}
	for _, sec := range r.Timeline {
		if sec.TMs < w.FromMs {
			continue
		}
		w.Offered += sec.Offered
		w.Attempts += sec.Attempts
		w.Admitted += sec.Admitted
		w.Rejected += sec.Rejected
		w.Throttled += sec.Throttled
		w.Unavailable += sec.Unavailable
	}
	if w.Attempts > 0 {
		w.ThrottledPc = 100 * float64(w.Throttled) / float64(w.Attempts)
	}
	if w.Offered > 0 {
		w.AdmittedPc = 100 * float64(w.Admitted) / float64(w.Offered)
	}
	r.AfterWarmUp = w
	return r
}

func pct(n, of uint64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(n)/float64(of))
}

func per(x float64, n uint64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", x/float64(n))
}

// WriteTable writes a readable summary of r.
func (r *Report) WriteTable(out io.Writer) error {
	if r == nil {
		return errors.New("sim: WriteTable of a nil Report")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s   seed %d   writers %d   offered rate %g/s   simulated %v (tail %v)",
		r.Scenario, r.Seed, r.Writers, r.Rate, time.Duration(r.SimDurationMs)*time.Millisecond, time.Duration(r.TailMs)*time.Millisecond)
	if r.WallMs > 0 {
		fmt.Fprintf(&b, "   wall %v (%.0f acquires a second)", time.Duration(r.WallMs)*time.Millisecond,
			float64(r.Acquires)/(float64(r.WallMs)/1000))
	}
	fmt.Fprintf(&b, "\nfaults: %s   clock skew: ±%dms\n\n", r.Faults, r.SkewMs)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	w := r.AfterWarmUp
	fmt.Fprintf(tw, "\twhole run\t\tafter warm-up (from %v)\t\t\n", time.Duration(w.FromMs)*time.Millisecond)
	row := func(name string, all, allOf, win, winOf uint64) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t\n", name, all, pct(all, allOf), win, pct(win, winOf))
	}
	fmt.Fprintf(tw, "offered\t%d\t\t%d\t\t\n", r.Offered, w.Offered)
	fmt.Fprintf(tw, "acquires\t%d\t%s\t%d\t%s\t\n", r.Acquires, pct(r.Acquires, r.Offered), w.Attempts, pct(w.Attempts, w.Offered))
	row("admitted", r.Admitted, r.Offered, w.Admitted, w.Offered)
	row("rejected", r.Rejected, r.Acquires, w.Rejected, w.Attempts)
	row("unavailable", r.Unavailable, r.Acquires, w.Unavailable, w.Attempts)
	row("throttled requests", r.Throttled, r.Acquires, w.Throttled, w.Attempts)
	tw.Flush()
	ops := r.Acquires + r.Adjusts + r.Rollbacks
	if r.Backlog > 0 {
		fmt.Fprintf(&b, "\nbacklog: %d offered acquires never started: the writers fell behind (an acquire waits for the previous one)", r.Backlog)
	}
	fmt.Fprintf(&b, "\nfalse rejections (no limit exceeded): %d; adjusts %d, rollbacks %d\n", r.FalseRejections, r.Adjusts, r.Rollbacks)
	fmt.Fprintf(&b, "store: %d round trips (%s per call), %d requests, %.0f WCU (%s per call), %.0f RCU\n",
		r.RoundTrips, per(float64(r.RoundTrips), ops), r.StoreRequests, r.WCU, per(r.WCU, ops), r.RCU)
	fmt.Fprintf(&b, "shards: final %d, doublings %d\n", r.ShardCountFinal, r.ShardDoublings)
	if r.Bypassed > 0 || r.Disabled > 0 {
		fmt.Fprintf(&b, "disabled scopes: %d acquires admitted by mode admit, %d refused by mode refuse (no write for either)\n", r.Bypassed, r.Disabled)
	}
	if r.WouldRefuse > 0 {
		fmt.Fprintf(&b, "shadow limits: %d admitted acquires one would have refused (not charged by it)\n", r.WouldRefuse)
	}
	if r.Crashes > 0 {
		fmt.Fprintf(&b, "crashes: %d processes died holding what they held\n", r.Crashes)
	}
	if r.Cancelled > 0 || r.UndoWrites > 0 {
		fmt.Fprintf(&b, "cancelled acquires: %d; cascade compensations: %d, %d of them failed by the fault plan\n", r.Cancelled, r.UndoWrites, r.UndoFaults)
	}
	if r.Expired > 0 {
		fmt.Fprintf(&b, "expired items deleted: %d; shard 0 recreated at more than one shard: %d\n", r.Expired, r.ShardZeroRecreated)
	}
	fmt.Fprintf(&b, "acquires by last path: round trips, WCU and RCU per acquire (RCU: reads of stored limits and entities not cached yet)\n")
	var rt, wcu float64
	for _, p := range []limiter.Path{limiter.PathSpeculative, limiter.PathFull, limiter.PathCreate, limiter.PathNormal,
		limiter.PathRetry, limiter.PathReject, limiter.PathLocal, limiter.PathPool, limiter.PathDouble, limiter.PathFailOpen, limiter.PathNone} {
		c, ok := r.PathCosts[p.String()]
		if !ok {
			continue
		}
		rt += float64(c.RoundTrips)
		wcu += c.WCU
		fmt.Fprintf(&b, "  %-12s %8d  %5s RT  %5s WCU  %5s RCU\n", p, c.Acquires, per(float64(c.RoundTrips), c.Acquires), per(c.WCU, c.Acquires), per(c.RCU, c.Acquires))
	}
	h := r.HotPath
	fmt.Fprintf(&b, "  hot path (admitted by one write, nothing read): %d acquires (%s of the admitted), %s RT, %s WCU\n",
		h.Acquires, pct(h.Acquires, r.Admitted), per(float64(h.RoundTrips), h.Acquires), per(h.WCU, h.Acquires))
	fmt.Fprintf(&b, "  every path over the admitted acquires: %s RT, %s WCU; above the hot path's cost: reads of limits not cached yet\n", per(rt, r.Admitted), per(wcu, r.Admitted))
	fmt.Fprintf(&b, "    (each writer's limiter reads a key's on its first acquire of it, and after its cache TTL), creations, full writes, lost races, refusals\n")
	fmt.Fprintf(&b, "liveness checks: %d\n", r.LivenessChecks)
	if r.OK() {
		fmt.Fprintf(&b, "invariants: all hold\n")
	} else {
		fmt.Fprintf(&b, "invariants: %d VIOLATION(S)\n", len(r.Violations))
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "  %s: %s\n", v.Invariant, v.Detail)
		}
	}
	fmt.Fprintf(&b, "trace hash: %s\n", r.TraceHash)
	_, err := io.WriteString(out, b.String())
	return err
}
