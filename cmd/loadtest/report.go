package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/dynamotest"
)

// report is what a run measured. Its JSON form (-json) is documented in
// docs/performance.md.
type report struct {
	Store              string           `json:"store"`
	Target             string           `json:"target"`
	Stream             bool             `json:"stream"`
	FailedWritesBilled bool             `json:"failed_writes_billed"`
	Writers            int              `json:"writers"`
	Processes          int              `json:"processes"`
	Rate               float64          `json:"rate"`
	Limits             string           `json:"limits"`
	ParentLimits       string           `json:"parent_limits,omitempty"`
	Consume            map[string]int64 `json:"consume"`
	Keys               int              `json:"keys"`
	Also               []string         `json:"also,omitempty"`
	Cascade            bool             `json:"cascade"`
	ServerLatencyMs    float64          `json:"server_latency_ms"`
	Seconds            float64          `json:"seconds"`
	Slices             int              `json:"slices"`
	LocalRefusals      bool             `json:"local_refusals"`

	Attempts          int64   `json:"attempts"`
	Admitted          int64   `json:"admitted"`
	Refused           int64   `json:"refused"`
	Unavailable       int64   `json:"unavailable"`
	Errors            int64   `json:"errors"`
	FirstError        string  `json:"first_error,omitempty"`
	AttemptsPerSecond float64 `json:"attempts_per_second"`
	// DroppedSlots counts the send slots dropped because every writer was
	// busy past their time (see pace).
	DroppedSlots int64 `json:"dropped_slots"`

	CallsPerAttempt      float64 `json:"calls_per_attempt"`
	CallsPerAdmitted     float64 `json:"calls_per_admitted"`
	StoreCallsPerAttempt float64 `json:"store_calls_per_attempt"`
	WCUPerAdmitted       float64 `json:"wcu_per_admitted"`
	// WCUPerRelease is what a Commit that gives back a concurrency cap's
	// slots costs (0 without a cap: Commit then makes no write).
	WCUPerRelease         float64          `json:"wcu_per_release,omitempty"`
	BilledWCUPerAdmitted  float64          `json:"billed_wcu_per_admitted"`
	RCUPerAdmitted        float64          `json:"rcu_per_admitted"`
	WritesPerSecond       float64          `json:"writes_per_second"`
	WritesPerLimitRate    float64          `json:"writes_per_limit_rate"`
	WritesPerBound        float64          `json:"writes_per_bound"`
	Throttled             int64            `json:"throttled"`
	RefusedBy             map[string]int64 `json:"refused_by,omitempty"`
	FalseRefusals         int64            `json:"false_refusals"`
	FalseRefusalsFraction float64          `json:"false_refusals_fraction"`
	HeldRefusals          int64            `json:"held_refusals"`
	// SplitFalseRefusals are the false refusals that started within a
	// second of a doubling of their key's bucket.
	SplitFalseRefusals int64 `json:"split_false_refusals"`
	// AdmissionBound is the most the limits allow over the run, burst +
	// rate x time from the start of the first measured slice to the end
	// of the last (raw slices included), for the tightest limit.
	AdmissionBound float64 `json:"admission_bound"`
	P50Ms          float64 `json:"p50_ms"`
	P99Ms          float64 `json:"p99_ms"`
	ShardDoublings int64   `json:"shard_doublings"`
	MaxShards      int64   `json:"max_shards"`

	Paths []pathStats `json:"paths"`
	// HotPath is the acquires admitted by one write and nothing else (no
	// read): the cost of an admitted acquire on a warm bucket, which the
	// averages mix with every other path's.
	HotPath      pathStats     `json:"hot_path"`
	Ops          []opStats     `json:"store_ops"`
	HotPartition *hotPartition `json:"hot_partition,omitempty"`
	Raw          *rawReport    `json:"raw,omitempty"`
	// RawRatio is the limiter's acquires per second over the raw floor's
	// writes per second.
	RawRatio float64 `json:"raw_ratio,omitempty"`
	// RawRequestRatio is the limiter's store requests per second over the
	// raw floor's writes per second: how the server kept up with the
	// limiter's requests, whatever their number per acquire.
	RawRequestRatio    float64 `json:"raw_request_ratio,omitempty"`
	LockTimeoutResends int64   `json:"lock_timeout_resends,omitempty"`
}

// rawReport is the raw floor: one unconditional UpdateItem ADD per call.
type rawReport struct {
	Item      string  `json:"item"` // tiny or bucket (-raw-item)
	Writes    int64   `json:"writes"`
	Failed    int64   `json:"failed"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
}

func (r *loadRun) report(ctx context.Context, hot *hotPartition) *report {
	o := r.o
	rep := &report{Store: o.store, Target: r.tgt.describe, Stream: r.tgt.stream, FailedWritesBilled: r.tgt.failedWritesBilled,
		Writers: o.writers, Processes: o.processes, Rate: o.rate, Limits: formatLimits(o.limits), Consume: o.consume,
		Keys: o.keys, Also: o.also, Cascade: o.cascade, ServerLatencyMs: ms(o.latency), Seconds: r.limiterTime.Seconds(),
		Slices: r.slices, LocalRefusals: o.localRefusals, HotPartition: hot}
	if o.cascade {
		rep.ParentLimits = formatLimits(o.parent)
	}
	var atts []attempt
	var lat []int64
	for _, w := range r.writers {
		atts = append(atts, w.atts...)
		rep.Errors += w.errs
		for name, n := range w.refusedBy {
			if rep.RefusedBy == nil {
				rep.RefusedBy = map[string]int64{}
			}
			rep.RefusedBy[name] += n
		}
		if w.errs > 0 && rep.FirstError == "" {
			rep.FirstError = w.firstErr
		}
	}
	for _, a := range atts {
		switch a.outcome {
		case outAdmitted:
			rep.Admitted++
		case outRefused:
			rep.Refused++
		case outUnavailable:
			rep.Unavailable++
		}
		lat = append(lat, a.end-a.start)
	}
	rep.Attempts = int64(len(atts))
	rep.AttemptsPerSecond = perSec(rep.Attempts, r.limiterTime)
	rep.DroppedSlots = r.dropped.Load()
	rep.P50Ms, rep.P99Ms = percentileMs(lat, 0.50), percentileMs(lat, 0.99)

	paths, total, fast := r.obs.snapshot()
	rep.Paths, rep.HotPath = paths, fast
	rep.Ops = r.st.stats()
	var calls, writes, failedWrites int64
	for _, op := range rep.Ops {
		calls += op.Calls
		rep.Throttled += op.Throttled
		if isWriteOp(slices.Index(opNames[:], op.Op)) {
			writes += op.Calls - op.Throttled - op.Failed
			failedWrites += op.ConditionFailed
		}
	}
	rep.CallsPerAttempt = ratio(total.RoundTrips, rep.Attempts)
	rep.CallsPerAdmitted = ratio(total.RoundTrips, rep.Admitted)
	rep.StoreCallsPerAttempt = ratio(calls, rep.Attempts)
	rep.WCUPerAdmitted = total.WCU / float64(max(rep.Admitted, 1))
	rep.BilledWCUPerAdmitted = rep.WCUPerAdmitted
	if !r.tgt.failedWritesBilled {
		rep.BilledWCUPerAdmitted = (total.WCU + float64(failedWrites)) / float64(max(rep.Admitted, 1))
	}
	rep.RCUPerAdmitted = total.RCU / float64(max(rep.Admitted, 1))
	if c := r.obs.commits; c.Acquires > 0 {
		rep.WCUPerRelease = c.WCU / float64(c.Acquires)
	}
	rep.ShardDoublings = total.Doublings
	rep.WritesPerSecond = perSec(writes, r.limiterTime)
	if len(o.limits) > 0 {
		rep.WritesPerLimitRate = rep.WritesPerSecond / perSecond(o.limits[0]) / float64(o.keys)
	}
	rep.AdmissionBound = r.admissionBound()
	if !math.IsInf(rep.AdmissionBound, 1) && rep.AdmissionBound > 0 {
		rep.WritesPerBound = float64(writes) / rep.AdmissionBound
	}
	// The judgement needs no bucket of the -also resources: they have the
	// same limits and are charged by the same acquires, all or none, so
	// their ideal buckets would be the main resource's, level for level.
	rep.FalseRefusals, rep.HeldRefusals, rep.SplitFalseRefusals = judge(atts, o.keys, o.limits, mergeLimits(o.parent, o.limits), o.consume, o.cascade, r.obs.splitsOf(o.keys))
	rep.FalseRefusalsFraction = ratio(rep.FalseRefusals, rep.Attempts)
	rep.MaxShards = r.maxShards(ctx)

	if o.raw {
		raw := &rawReport{Item: o.rawItem, Seconds: r.rawTime.Seconds()}
		var rl []int64
		for _, w := range r.writers {
			raw.Failed += w.rawFails
			for _, us := range w.raw {
				rl = append(rl, int64(us)*int64(time.Microsecond))
			}
		}
		raw.Writes = int64(len(rl))
		raw.PerSecond = perSec(raw.Writes, r.rawTime)
		raw.P50Ms, raw.P99Ms = percentileMs(rl, 0.50), percentileMs(rl, 0.99)
		rep.Raw = raw
		if raw.PerSecond > 0 {
			rep.RawRatio = rep.AttemptsPerSecond / raw.PerSecond
			rep.RawRequestRatio = perSec(calls, r.limiterTime) / raw.PerSecond
		}
	}
	if o.store == storeDynamoDBLocal {
		rep.LockTimeoutResends = dynamotest.LockTimeoutRetries()
	}
	return rep
}

// admissionBound is the most acquires the limits admit from the start of
// the measurement to the end of its last attempt: per limit, (burst + rate
// x time) / tokens per acquire, for every entity (or the one parent with
// cascade); the tightest of them.
func (r *loadRun) admissionBound() float64 {
	var last int64
	for _, w := range r.writers {
		for _, a := range w.atts {
			last = max(last, a.end)
		}
	}
	secs := time.Duration(last).Seconds()
	bound := func(ls []limiter.Limit, copies int) float64 {
		b := math.Inf(1)
		for _, l := range ls {
			if c := r.o.consume[l.Name]; c > 0 && l.Window != "concurrent" { // a cap bounds leases in flight, not admissions
				b = min(b, float64(copies)*(float64(l.EffectiveBurst())+perSecond(l)*secs)/float64(c))
			}
		}
		return b
	}
	b := bound(r.o.limits, r.o.keys)
	if r.o.cascade {
		b = min(b, bound(mergeLimits(r.o.parent, r.o.limits), 1))
	}
	return b
}

// maxShards reads the shard count of up to 16 buckets (and the parent's)
// after the run and returns the largest.
func (r *loadRun) maxShards(ctx context.Context) int64 {
	names := entityNames(min(r.o.keys, 16))
	if r.o.cascade {
		names = append(names, r.parent)
	}
	var n int64
	for _, e := range names {
		st, err := r.lims[0].Status(ctx, e, r.o.resource, r.o.limits)
		if err != nil {
			continue
		}
		for _, s := range st {
			n = max(n, s.Shards)
		}
	}
	return n
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentileMs returns the q-quantile of ns (nearest rank), in ms; it
// sorts ns.
func percentileMs(ns []int64, q float64) float64 {
	if len(ns) == 0 {
		return 0
	}
	slices.Sort(ns)
	i := int(q*float64(len(ns))+0.5) - 1
	return ms(time.Duration(ns[min(max(i, 0), len(ns)-1)]))
}

// print writes the report for a reader.
func (rep *report) print(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	load := "closed loop (every writer as fast as it can)"
	if rep.Rate > 0 {
		load = fmt.Sprintf("offered %g acquires/s", rep.Rate)
	}
	p("store      %s\n", rep.Target)
	p("load       %d writers in %d process(es), %s, %d key(s), limits %s, consume %s", rep.Writers, rep.Processes, load,
		rep.Keys, rep.Limits, formatConsume(rep.Consume))
	if len(rep.Also) > 0 {
		p(", every acquire also charging %s", strings.Join(rep.Also, ", "))
	}
	if rep.Cascade {
		p(", cascade to one parent with limits %s", rep.ParentLimits)
	}
	if !rep.LocalRefusals {
		p(", local refusals off")
	}
	p("\n")
	switch {
	case rep.Raw != nil && rep.Slices == 1:
		p("timing     limiter %.1fs, then the raw floor %.1fs, back to back\n", rep.Seconds, rep.Raw.Seconds)
	case rep.Raw != nil:
		p("timing     limiter %.1fs and raw floor %.1fs, interleaved in %d slices of each\n", rep.Seconds, rep.Raw.Seconds, rep.Slices)
	default:
		p("timing     limiter %.1fs\n", rep.Seconds)
	}
	p("\n")
	p("acquires   %d attempted (%.1f/s): %d admitted (%s), %d refused, %d unavailable",
		rep.Attempts, rep.AttemptsPerSecond, rep.Admitted, pct(rep.Admitted, rep.Attempts), rep.Refused, rep.Unavailable)
	if rep.Errors > 0 {
		p(", %d errors", rep.Errors)
	}
	if rep.DroppedSlots > 0 {
		p("; %d send slots dropped, over %v late (every writer busy)", rep.DroppedSlots, maxLate)
	}
	p("\n")
	p("calls      %.3f per attempt, %.3f per admitted acquire (round trips; a cascade's two concurrent writes count once)\n",
		rep.CallsPerAttempt, rep.CallsPerAdmitted)
	p("           %.3f store requests per attempt (every request, concurrent writes separately)\n", rep.StoreCallsPerAttempt)
	p("capacity   %.3f WCU and %.3f RCU per admitted acquire", rep.WCUPerAdmitted, rep.RCUPerAdmitted)
	if !rep.FailedWritesBilled {
		p(" as DynamoDB Local reports them: it reports 0 WCU for a failed conditional write, which AWS bills 1 WCU;\n")
		p("           billed as AWS bills: %.3f WCU per admitted acquire", rep.BilledWCUPerAdmitted)
	}
	p("\n")
	if rep.WCUPerRelease > 0 {
		p("release    %.3f WCU per Commit that gave back a concurrency cap's slots\n", rep.WCUPerRelease)
	}
	if h := rep.HotPath; h.Acquires > 0 {
		p("hot path   %.3f calls, %.3f WCU per acquire admitted by one write, nothing read (%d, %s of the admitted);\n",
			float64(h.RoundTrips)/float64(h.Acquires), h.WCU/float64(h.Acquires), h.Acquires, pct(h.Acquires, rep.Admitted))
		p("           the averages above also count the other paths below: unavailable (throttled) attempts, creations, full writes,\n           lost races, refusals, reads of limits not cached yet\n")
	}
	p("writes     %.1f per second (not throttled)", rep.WritesPerSecond)
	if rep.Keys > 0 {
		p(", %.3f x the rate of %s per key", rep.WritesPerLimitRate, strings.SplitN(rep.Limits, ",", 2)[0])
	}
	if rep.WritesPerBound > 0 {
		p(", %.3f x what the limits allow", rep.WritesPerBound)
	}
	p("; %d throttled requests\n", rep.Throttled)
	p("bound      admitted %d of at most %.0f the limits allow over the run (%.1f%%)\n", rep.Admitted, rep.AdmissionBound,
		100*float64(rep.Admitted)/max(rep.AdmissionBound, 1))
	p("refusals   %d false (%s of attempts): refused while the ideal bucket held the tokens, which then went unused; %d (%s) while it held them", rep.FalseRefusals, pctF(rep.FalseRefusalsFraction), rep.HeldRefusals, pctF(ratio(rep.HeldRefusals, rep.Attempts)))
	if len(rep.RefusedBy) > 0 {
		p("; refused by %s", formatConsume(rep.RefusedBy))
	}
	p("\n")
	if rep.ShardDoublings > 0 {
		p("           %d of the false refusals started within a second of a doubling of their key (the split's)\n", rep.SplitFalseRefusals)
	}
	p("latency    p50 %.2f ms, p99 %.2f ms (Acquire, every outcome)\n", rep.P50Ms, rep.P99Ms)
	p("shards     %d doublings; largest shard count at the end %d\n", rep.ShardDoublings, rep.MaxShards)
	if h := rep.HotPartition; h != nil {
		p("partition  hottest %s: peak %.0f WCU/s over one second (any partition after the first second: %.0f), %.0f WCU in all, %d throttled\n",
			h.PK, h.PeakWCUPerSecond, h.LaterPeakWCUPerSecond, h.WCU, h.Throttles)
	}
	if r := rep.Raw; r != nil {
		item := "one item"
		if r.Item == rawItemBucket {
			item = "one bucket item of the limiter's"
		}
		p("raw floor  %d unconditional UpdateItem ADDs on %s (%.1f/s, p50 %.2f ms, p99 %.2f ms), %d failed or throttled\n",
			r.Writes, item, r.PerSecond, r.P50Ms, r.P99Ms, r.Failed)
		p("           limiter/raw throughput %.3f (acquires per raw write); the limiter's store requests per raw write %.3f\n", rep.RawRatio, rep.RawRequestRatio)
	}
	if rep.LockTimeoutResends > 0 {
		p("note       %d requests resent after DynamoDB Local's lock timeout (an emulator artifact, not applied)\n", rep.LockTimeoutResends)
	}
	p("\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "path\tacquires\tshare\tadmitted\trefused\tunavail.\tcalls/acq\tWCU/acq\tRCU/acq\tthrottled\tdoublings\t")
	for _, ps := range rep.Paths {
		n := float64(max(ps.Acquires, 1))
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%.3f\t%.3f\t%.3f\t%d\t%d\t\n", ps.Path, ps.Acquires, pct(ps.Acquires, rep.Attempts),
			ps.Admitted, ps.Refused, ps.Unavailable, float64(ps.RoundTrips)/n, ps.WCU/n, ps.RCU/n, ps.Throttled, ps.Doublings)
	}
	tw.Flush()
	p("\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "request\tcalls\tper attempt\tcond. failed\tthrottled\tfailed\tWCU\tRCU\t")
	for _, op := range rep.Ops {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%d\t%d\t%d\t%.1f\t%.1f\t\n", op.Op, op.Calls, ratio(op.Calls, rep.Attempts),
			op.ConditionFailed, op.Throttled, op.Failed, op.WCU, op.RCU)
	}
	tw.Flush()
}

func formatConsume(c map[string]int64) string {
	var parts []string
	for name, n := range c {
		parts = append(parts, fmt.Sprintf("%s:%d", name, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func pct(a, b int64) string { return pctF(ratio(a, b)) }

func pctF(f float64) string { return fmt.Sprintf("%.2f%%", 100*f) }
