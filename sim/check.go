package sim

import (
	"cmp"
	"fmt"
	"github.com/shardlimit/limiter/internal/engine"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// Invariant names, as violations report them (docs/simulation.md).
const (
	InvHarness      = "0-harness"                // the simulation itself went wrong (a workload bug, a store validation error)
	InvLostUpdate   = "1-no-lost-update"         // each bucket's final tc matches the history
	InvDoubleRefill = "2-no-double-refill"       // no write credits a refill window twice
	InvOverAdmit    = "3-never-over-admit"       // no window admits more than burst plus refill
	InvNegative     = "4-acquire-never-negative" // an acquire never leaves a limit below 0
	InvAllOrNothing = "5-all-or-nothing"         // an acquire charges all its limits and buckets, or none
	InvDoubling     = "6-shard-doubling"         // shard counts only double, and only when justified
	InvLiveness     = "7-liveness"               // in the tail, a retry after RetryAfter on an untouched bucket is admitted
	InvDeterminism  = "8-determinism"            // the same configuration and seed give the same trace hash
	// InvCancelled: an acquire whose caller cancelled its context, and
	// whose store calls met the cancellation, must end with the context's
	// error (or a refusal), never with a lease, fail-open included.
	InvCancelled = "cancelled-acquire"
	// InvQuota: what acquires take of a calendar quota in one window (all
	// shards of the bucket together, net of the refunds to it) is at most
	// the quota at every acquire's write; every write dates the quota's
	// window at a boundary of its calendar around the write's time; and
	// a write that charges it leaves the item expiring after that window's
	// end by every clock.
	InvQuota = "quota-per-window"
	// InvModes: an acquire of a disabled scope makes no write, to its
	// bucket or its cascade parent's; in admit mode it is admitted, in
	// refuse mode refused (Outcome Disabled), and no acquire acts on a mode
	// its scope did not have within the cache TTL before it. Its tokens
	// count in no bucket's accounting (invariants 1 and 3 leave it out).
	InvModes = "modes"
)

// Violation is one broken invariant.
type Violation struct {
	// Invariant is the broken invariant, one of the Inv* constants.
	Invariant string `json:"invariant"`
	// Detail says what broke, for a human, or "... and N more" after the
	// first 20 of an invariant.
	Detail string `json:"detail"`
}

// maxDetails bounds the violations kept per invariant; the rest are
// counted in one summary entry.
const maxDetails = 20

// wcuName is the limiter's hidden per-shard write-unit limit.
const wcuName = "wcu"

// wcuBurst is the hidden limit's burst in millitokens: 1000 write units.
const wcuBurst = 1000 * 1000

// checker verifies the limiter's invariants from what it is fed:
// the change stream's records with the operation that caused each
// ([checker.Record]), the finished operations of the client history
// ([checker.OpDone]), and the store's final items ([checker.Finish]). It
// works online, in memory proportional to the buckets (plus one small
// entry per admission for the window check), so that a long simulation
// need not keep its stream. It never looks at the limiter's own
// bookkeeping.
//
// Invariant 8 (determinism) compares two runs: see [checkDeterminism].
type checker struct {
	m    *model
	base int64 // Unix ns of virtual time 0
	nlim int
	// read names the attributes decode needs (rf, shard_count, then tk,
	// tc, ra, rp of each limit and of the hidden one, then ttl), read into
	// vals and has.
	read []string
	vals [3 + 4*(MaxLimits+1)]int64
	has  [3 + 4*(MaxLimits+1)]bool

	buckets []bstate
	byName  map[[2]string]int32
	itemOf  map[string]int32 // bucket PK -> item index; -1: not a bucket of the model
	items   []istate
	// heard is, per client and bucket, when the client last sent a write
	// to one of the bucket's items and received the item in answer: its
	// limiter's image of the bucket is at least that recent (see Heard).
	heard map[heard]int64

	violations []Violation
	perInv     map[string]int

	// Doublings counts shard-count doublings seen on shard 0 items.
	Doublings int
	// ShardZeroRecreated counts the shard 0 items created at more than one
	// shard: after shard 0 expired while other shards of its bucket lived on.
	ShardZeroRecreated int
	// LivenessChecks counts retries judged by invariant 7.
	LivenessChecks int
	finished       bool
	maxShardsSeen  int64
	// latency is the longest time (ns) between a client sending a write
	// and the store applying it, set by the scheduler at the end. The
	// limiter computes refill on its clock when it sends; admissions are
	// timed when they apply; a window of apply times may therefore use
	// refill of up to that much earlier (invariant 3's slack).
	latency int64

	// PartitionAvailable, when set, returns the write units a table
	// partition holds now (memsim's partition model): a doubling is
	// justified when one of the bucket's partitions is nearly out of them.
	PartitionAvailable func(pk string) float64
	// PartitionConsumed, when set, returns the write units a table
	// partition has consumed so far (failed conditional writes included):
	// a doubling is also justified when one of the bucket's partitions ran
	// at proactiveRate of its ceiling or more over the last rateWindow,
	// the aggregator's proactive threshold.
	PartitionConsumed func(pk string) float64
}

// The proactive doubling rule the checker accepts (the aggregator doubles
// at 80 % of a partition's 1000 write units a second; docs/aggregator.md).
const (
	proactiveRate = 800.0 // write units per second
	// rateWindow is the shortest window (ns) a partition's write rate is
	// measured over.
	rateWindow = int64(400 * time.Millisecond)
	// doublingLag is how long after a partition last ran at proactiveRate a
	// doubling still counts as caused by it: a client whose doubling write
	// a throttle refused (a storm, the hot partition itself) tries it again
	// first on its next acquires, for up to 2 s (docs/sharding.md), and
	// decided on an estimate up to half a second old.
	doublingLag = int64(2500 * time.Millisecond)
	// rateLookback is how far back (ns) from a doubling the rate windows
	// may end.
	rateLookback  = int64(time.Second)
	rateSampleGap = int64(50 * time.Millisecond)
	minRateWindow = int64(100 * time.Millisecond)
)

// PartitionThrottled tells the checker that a write to partition pk was
// refused at virtual time at because the partition was over its ceiling
// (not an injected throttle).
func (c *checker) PartitionThrottled(pk string, at int64) {
	if ii := c.item(pk); ii >= 0 {
		c.items[ii].throttledAt, c.items[ii].throttled = at, true
	}
}

type limInfo struct {
	ok            bool
	burst, ra, rp int64 // millitokens, ms (the original, undivided limit)
	// cal is a calendar quota's (nil for a rate): its item attributes are
	// q_{name}_{tk,tc,ws,cp}, decoded into tk, tc, ra (the window's start)
	// and rp (the quota); burst is the quota.
	cal    *bucket.Calendar
	shadow bool // shadow at some time: an acquire may skip it
}

type bstate struct {
	lim     [MaxLimits]limInfo
	items   []int32 // item indexes of the bucket's shards
	shards  int64   // shard_count of shard 0 (0 before it exists)
	changes uint64  // stream records on any shard
	// The latest stream record of any shard (when it applied and which
	// client caused it, -1 for none), and the latest by another client
	// than that one: the latest change by anyone but a given client.
	lastAt, otherAt int64
	lastBy          int32
	// invariant 1: tc must end in [exact+lo, exact+hi] (millitokens)
	exact, lo, hi [MaxLimits]int64
	// itemUncertain: some contribution's shard is unknown, so only the
	// bucket-wide sum is checked.
	itemUncertain bool
	// invariant 3: admissions (+) and refunds (-), millitokens
	events [MaxLimits][]admEvent
	// quota-per-window: what acquires took net of refunds, per quota and
	// window start (Unix ms)
	quotaNet map[[2]int64]int64
}

// changedBy reports whether a client other than client changed the bucket
// at or after since.
func (b *bstate) changedBy(client int32, since int64) bool {
	at := b.lastAt
	if b.lastBy == client {
		at = b.otherAt
	}
	return at >= since
}

type admEvent struct {
	at  int64
	amt int64
}

type istate struct {
	pk            string
	bucket, shard int32
	exact         [MaxLimits]int64
	// an ideal wcu bucket (tokens) fed by the item's records, for the
	// doubling-cause check
	wcuLevel float64
	wcuAt    int64
	wcuInit  bool
	// the last write refused because the partition was over its ceiling
	throttledAt int64
	throttled   bool
	// samples of the partition's consumed write units, a ring, at least
	// rateSampleGap apart (for the proactive rate)
	cons     [32]consSample
	consNext int
	// the last sample at which the partition had run at proactiveRate or
	// more over the window before it (0: never)
	hotRateAt int64
	// Its life: existed once created; alive from bornAt until a REMOVE at
	// diedAt; n its shard_count, prevN the one before, nAt when it changed
	// (for the count a recreated shard 0 may take, invariant 6); gone the
	// tc its deletions took (invariant 1).
	existed, alive bool
	bornAt, diedAt int64
	n, prevN, nAt  int64
	gone           [MaxLimits]int64
}

type consSample struct {
	at    int64
	units float64
}

// sampleConsumption records the partition's consumption now and then.
func (c *checker) sampleConsumption(is *istate, at int64) {
	if c.PartitionConsumed == nil {
		return
	}
	last := &is.cons[(is.consNext+len(is.cons)-1)%len(is.cons)]
	if last.at != 0 && at-last.at < rateSampleGap {
		return
	}
	units := c.PartitionConsumed(is.pk)
	is.cons[is.consNext] = consSample{at: at, units: units}
	is.consNext = (is.consNext + 1) % len(is.cons)
	if c.rateTo(is, at, units) >= proactiveRate {
		is.hotRateAt = at
	}
}

// rateTo returns the partition's write units per second over the
// shortest sample window of at least rateWindow ending at at, where its
// consumption is now; over the item's whole life when it is younger than
// that (at least minRateWindow, else 0).
func (c *checker) rateTo(is *istate, at int64, now float64) float64 {
	best := is.windowStart(at)
	if best < 0 || at-is.cons[best].at < minRateWindow {
		return 0
	}
	s := is.cons[best]
	return (now - s.units) / (float64(at-s.at) / 1e9)
}

// windowStart returns the sample a rate at at is measured from: the
// latest at least rateWindow old, else the oldest (-1: none). The samples
// are in the ring in the order of their times, which only grow
// (sampleConsumption keeps them rateSampleGap apart): from the newest
// back, the first at least rateWindow old is the latest such, and the
// last one met the oldest.
func (is *istate) windowStart(at int64) int {
	oldest := -1
	n := len(is.cons)
	for k := 1; k <= n; k++ {
		i := (is.consNext - k + n) % n
		if s := &is.cons[i]; s.at != 0 && at-s.at >= rateWindow {
			return i
		} else if s.at != 0 {
			oldest = i
		}
	}
	return oldest
}

// peakRate returns the partition's highest write units per second over
// the sample windows of at least rateWindow that end within rateLookback
// of at (the latest ending at at): a client decides from estimates that
// are a few hundred ms old, so a doubling is judged against the recent
// past, as a real throttle is (hotRecent).
func (c *checker) peakRate(is *istate, at int64) float64 {
	peak := 0.0
	if c.PartitionConsumed != nil {
		peak = c.rateTo(is, at, c.PartitionConsumed(is.pk))
	}
	for _, e := range is.cons {
		if e.at == 0 || at-e.at > rateLookback {
			continue
		}
		for _, s := range is.cons {
			if s.at == 0 || e.at-s.at < rateWindow || e.at-s.at > 2*rateWindow {
				continue
			}
			peak = max(peak, (e.units-s.units)/(float64(e.at-s.at)/1e9))
		}
	}
	return peak
}

// newChecker returns a checker for a model; base is the Unix time (ns) of
// virtual time 0, which the stream's record times are measured from.
func newChecker(m *model, base int64) *checker {
	c := &checker{m: m, base: base, byName: make(map[[2]string]int32, len(m.Buckets)),
		itemOf: make(map[string]int32), perInv: make(map[string]int), heard: make(map[heard]int64)}
	c.nlim = len(m.LimitNames)
	c.read = []string{"rf", "shard_count"}
	for i, n := range append(slices.Clone(m.LimitNames), wcuName) {
		if i < len(m.Quotas) && m.Quotas[i] != nil {
			for _, f := range [...]string{bucket.FieldTokens, bucket.FieldTotalConsumed, bucket.FieldWindow, bucket.FieldCapacity} {
				c.read = append(c.read, bucket.QuotaAttrName(n, f))
			}
			continue
		}
		for _, f := range [...]string{bucket.FieldTokens, bucket.FieldTotalConsumed, bucket.FieldRefillAmount, bucket.FieldRefillPeriod} {
			c.read = append(c.read, bucket.AttrName(n, f))
		}
	}
	c.read = append(c.read, store.AttrTTL)
	c.buckets = make([]bstate, len(m.Buckets))
	for bi, bm := range m.Buckets {
		c.byName[[2]string{bm.Entity, bm.Resource}] = int32(bi)
		b := &c.buckets[bi]
		for i, n := range m.LimitNames {
			for _, l := range bm.Limits {
				if l.Name == n {
					b.lim[i] = limInfo{ok: true, burst: l.EffectiveBurst() * bucket.MilliPerToken,
						ra: l.Refill * bucket.MilliPerToken, rp: l.Period.Milliseconds(), shadow: l.Shadow}
					if l.Window == "concurrent" {
						b.lim[i] = limInfo{} // a cap: InvCap checks it, from the leases
						continue
					}
					if l.Window != "" {
						b.lim[i].cal = m.Quotas[i]
						b.quotaNet = make(map[[2]int64]int64)
					}
				}
			}
		}
	}
	return c
}

func (c *checker) flag(inv, format string, args ...any) {
	c.perInv[inv]++
	if c.perInv[inv] <= maxDetails {
		c.violations = append(c.violations, Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
}

// Violations returns what was found, in the order found, at most 20 per
// invariant followed by a count of the rest.
func (c *checker) Violations() []Violation {
	out := slices.Clone(c.violations)
	for _, inv := range slices.Sorted(maps.Keys(c.perInv)) {
		if n := c.perInv[inv]; n > maxDetails {
			out = append(out, Violation{Invariant: inv, Detail: fmt.Sprintf("... and %d more", n-maxDetails)})
		}
	}
	return out
}

// Snapshot returns the change counters of the buckets an operation of
// client on bucket b writes (by role, see effects), and when the client
// last heard of each (see Heard), for a later liveness judgement.
func (c *checker) Snapshot(client, b int32) (s [maxRoles]uint64, at [maxRoles]int64) {
	for r, bi := range c.m.roles(b) {
		if bi >= 0 {
			s[r], at[r] = c.buckets[bi].changes, c.heard[heard{client, bi}]
		}
	}
	return s, at
}

type heard struct{ client, bucket int32 }

// Heard records that client sent a write to the item pk at sent (virtual
// ns) and received an answer that carries the item (applied, or refused
// by its condition): from then on its limiter's image of the bucket is
// at least as recent as sent. A new process (a crash) forgets, with
// Forget.
func (c *checker) Heard(client int32, pk string, sent int64) {
	if ii := c.item(pk); ii >= 0 {
		c.heard[heard{client, c.items[ii].bucket}] = sent
	}
}

// Forget forgets what client heard of every bucket: its process
// restarted with an empty memory.
func (c *checker) Forget(client int32) {
	for k := range c.heard {
		if k.client == client {
			delete(c.heard, k)
		}
	}
}

func (c *checker) item(pk string) int32 {
	if ii, ok := c.itemOf[pk]; ok {
		return ii
	}
	ii := int32(-1)
	if ref, ok := keys.ParseBucketPK(pk); ok && ref.Namespace == c.m.Namespace {
		if bi, ok := c.byName[[2]string{ref.Entity, ref.Resource}]; ok {
			ii = int32(len(c.items))
			c.items = append(c.items, istate{pk: pk, bucket: bi, shard: int32(ref.Shard)})
			c.buckets[bi].items = append(c.buckets[bi].items, ii)
		}
	}
	c.itemOf[pk] = ii
	return ii
}

// img is the part of a bucket item the checkers read.
type img struct {
	ok       bool
	rf, n    int64
	has      [MaxLimits]bool
	tk, tc   [MaxLimits]int64
	ra, rp   [MaxLimits]int64
	whas     bool
	wtk, wtc int64
	ttl      int64 // Unix s; 0: none
}

func (c *checker) decode(it store.Item, o *img) {
	if it == nil {
		return
	}
	v, has := c.vals[:], c.has[:]
	for i, name := range c.read {
		v[i], has[i] = it.Int(name)
	}
	o.ok, o.rf, o.n = true, v[0], 1
	if n := v[1]; has[1] && n >= 1 {
		o.n = n
	}
	for i := 0; i < c.nlim; i++ {
		j := 2 + 4*i
		if !has[j] {
			continue
		}
		o.has[i] = true
		o.tk[i], o.tc[i], o.ra[i], o.rp[i] = v[j], v[j+1], v[j+2], v[j+3]
	}
	if j := 2 + 4*c.nlim; has[j] {
		o.whas, o.wtk, o.wtc = true, v[j], v[j+1]
	}
	if j := 2 + 4*(c.nlim+1); has[j] {
		o.ttl = v[j]
	}
}

// refillBound returns floor(dt * ra / rp) for dt >= 0 ms, saturated.
func refillBound(dt, ra, rp int64) int64 {
	if dt <= 0 || ra <= 0 || rp <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(dt), uint64(ra))
	if hi >= uint64(rp) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(rp))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func (c *checker) fmtT(at int64) string { return time.Duration(at).String() }

// Record feeds one change stream record and the operation whose request
// produced it (nil when no simulated client caused it: setup writes).
func (c *checker) Record(rec *memsim.Record, cause *cause) {
	ii := c.item(rec.Keys.PK)
	if ii < 0 {
		return
	}
	is := &c.items[ii]
	bi := is.bucket
	b := &c.buckets[bi]
	at := rec.At.UnixNano() - c.base
	var o, n img
	c.decode(rec.Old, &o)
	c.decode(rec.New, &n)
	b.changes++
	by := int32(-1)
	if cause != nil {
		by = int32(cause.Client)
	}
	if by != b.lastBy || by < 0 {
		b.otherAt = b.lastAt
	}
	b.lastAt, b.lastBy = at, by
	pk := rec.Keys.PK
	c.sampleConsumption(is, at)

	// Invariant 6: shard 0's shard_count runs 1, 2, 4, ...
	if is.shard == 0 && n.ok {
		switch {
		case !o.ok:
			from := at
			if cause != nil {
				from = min(cause.Start, at)
			}
			c.shardZeroCreated(bi, n.n, from, at, pk, rec.Seq)
		case n.n == o.n:
		case n.n == 2*o.n:
			c.Doublings++
			if c.m.CheckDoublingCause {
				c.checkDoublingCause(bi, o.n, at, rec.Seq)
			}
		default:
			c.flag(InvDoubling, "%s shard_count went from %d to %d (seq %d at %s)", pk, o.n, n.n, rec.Seq, c.fmtT(at))
		}
		b.shards = n.n
		c.maxShardsSeen = max(c.maxShardsSeen, n.n)
	}

	c.lifecycle(is, &o, &n, at)

	// Invariant 2: rf never decreases, refill credited <= rate x rf advance.
	// A recreated item starts afresh (no old image).
	if o.ok && n.ok {
		if n.rf < o.rf {
			c.flag(InvDoubleRefill, "%s rf went backwards from %d to %d (seq %d at %s)", pk, o.rf, n.rf, rec.Seq, c.fmtT(at))
		} else {
			dt := n.rf - o.rf
			for i := 0; i < c.nlim; i++ {
				if !o.has[i] || !n.has[i] || b.lim[i].cal != nil {
					continue // (a quota has no refill: its windows are checked below)
				}
				credited := (n.tk[i] + n.tc[i]) - (o.tk[i] + o.tc[i])
				ra := floorDiv(o.ra[i], max(o.n, 1))
				if allowed := refillBound(dt, ra, o.rp[i]); credited > allowed+1 {
					c.flag(InvDoubleRefill, "%s limit %s credited %d millitokens of refill while rf advanced %d ms (at most %d at %d/%d ms per shard; seq %d at %s)",
						pk, c.m.LimitNames[i], credited, dt, allowed, ra, o.rp[i], rec.Seq, c.fmtT(at))
				}
			}
			// The hidden wcu limit is a load gauge, not a promise: a full
			// write (every application limit full) resets it to its burst
			// minus the write, forgiving the few ms of refill it still
			// lacked (docs/write-paths.md). It may never hold more than its
			// burst; whether doublings were justified is invariant 6's
			// business, judged against an ideal wcu bucket below.
			if n.whas && n.wtk > wcuBurst {
				c.flag(InvDoubleRefill, "%s limit wcu holds %d millitokens, above its burst %d (seq %d at %s)",
					pk, n.wtk, int64(wcuBurst), rec.Seq, c.fmtT(at))
			}
		}
	}

	// The ideal wcu bucket of this item.
	if n.whas {
		if dw := n.wtc - o.wtc; dw > 0 {
			c.wcuRefill(is, at)
			is.wcuLevel -= float64(dw) / float64(bucket.MilliPerToken)
		}
	}

	if cause == nil {
		return
	}
	role := -1 // the op's bucket (0), its parent's (1), an Also bucket or its parent's (2...)
	if cb := cause.Bucket; cb >= 0 && int(cb) < len(c.m.Buckets) {
		for r, x := range c.m.roles(cb) {
			if x == bi {
				role = r
			}
		}
	}
	if role < 0 {
		c.flag(InvHarness, "op #%d (%s of bucket %d) wrote %s, which is none of its buckets (its own, its Also ones, their parents')", cause.Op, cause.Kind, cause.Bucket, pk)
		return
	}
	var dtc [MaxLimits]int64
	for i := 0; i < c.nlim; i++ {
		if n.ok && n.has[i] {
			dtc[i] = n.tc[i] - o.tc[i] // a missing old image or limit counts from 0
		} else if o.ok && o.has[i] {
			dtc[i] = -o.tc[i]
		}
	}
	c.quotaWindows(cause, b, pk, &n, &dtc, at, rec.Seq)

	if cause.Kind == opAcquire && n.ok {
		// Invariant 4: a charge by an acquire leaves the balance >= 0
		// (a reservation taken with it included): the stored tk plus the
		// refill since rf, which a consumption-only write admits from
		// (the refill route), judged at the apply time plus the skew
		// spread and the latency bound (the client computes on its clock
		// when it sends).
		late := (c.base + at + c.m.SkewSpread + c.latency + 999_999) / 1_000_000 // Unix ms
		for i := 0; i < c.nlim; i++ {
			if dtc[i] <= 0 || n.tk[i] >= 0 {
				continue
			}
			eff := n.tk[i] // a quota: what is left in its window
			if b.lim[i].cal == nil {
				eff += refillBound(late-n.rf, floorDiv(n.ra[i], max(n.n, 1)), n.rp[i])
			}
			if eff < 0 {
				c.flag(InvNegative, "op #%d (acquire by client %d) charged %s limit %s %d millitokens and left tk = %d, %d with the refill since rf (seq %d at %s)",
					cause.Op, cause.Client, pk, c.m.LimitNames[i], dtc[i], n.tk[i], eff, rec.Seq, c.fmtT(at))
			}
		}
		// Invariant 5: one write charges every limit of the acquire, or
		// none (or refunds every one: a cascade compensation).
		sign, uneven, kept := int64(2), false, false // 2: no limit seen yet
		for i := 0; i < c.nlim; i++ {
			a := int64(0)
			if b.lim[i].ok {
				a = cause.Amount[i] * bucket.MilliPerToken
			}
			switch d := dtc[i]; {
			case d == 0 && b.lim[i].shadow:
				// A shadow limit the acquire skipped (allOrNothing checks
				// the operation's exact amounts).
			case d == 0 && a != 0 && c.straddles(b.lim[i].cal, &operation{Start: cause.Start, End: at}):
				// A quota whose window ended since the acquire started (the
				// item may be in the next one already, started by a clock
				// running ahead before the boundary in true time): a
				// compensation leaves its charge there (see allOrNothing); a
				// charge would have started the next window.
				kept = true
			case a == 0 || (d != 0 && d != a && d != -a):
				uneven = uneven || d != 0
			case sign == 2:
				sign = d / a // 1 charged, -1 refunded, 0 untouched
			default:
				uneven = uneven || d/a != sign
			}
		}
		// A charge that left a quota out is uneven.
		uneven = uneven || kept && sign == 1
		if uneven && !c.m.Reservations { // with reservations: per operation, in allOrNothing
			c.flag(InvAllOrNothing, "op #%d (acquire by client %d of %v) changed the tc counters of %s unevenly: %v (seq %d at %s)",
				cause.Op, cause.Client, cause.Amount[:c.nlim], pk, slices.Clone(dtc[:c.nlim]), rec.Seq, c.fmtT(at)) // a copy: dtc stays on the stack
		}
	}

	charged := int64(-1) // when the op's previous write to this bucket applied
	if e := cause.Effects; e != nil {
		if e.Changes[role] > 0 {
			charged = e.LastApply[role]
		}
		for i := 0; i < c.nlim; i++ {
			e.Net[role][i] += dtc[i]
		}
		e.LastApply[role] = at
		e.Changes[role]++
	}

	// Invariant 3: refunds (negative adjusts, rollbacks) return tokens at
	// the time they apply. So does a cascade's compensation (an acquire's
	// write that lowers tc, without reservations): its acquire was not
	// admitted, so the charge it returns counts as taken when it applied,
	// or the tokens it held would look new when they come back, which can
	// be a second after the charge (the other side's answer was lost).
	undo := cause.Kind == opAcquire && !c.m.Reservations && charged >= 0
	if cause.Kind == opAdjust || cause.Kind == opRollback || undo {
		for i := 0; i < c.nlim; i++ {
			if dtc[i] < 0 && b.lim[i].ok {
				if undo {
					b.events[i] = append(b.events[i], admEvent{at: charged, amt: -dtc[i]})
				}
				b.events[i] = append(b.events[i], admEvent{at: at, amt: dtc[i]})
			}
		}
	}
}

// lifecycle follows an item's creations, shard counts and deletions.
func (c *checker) lifecycle(is *istate, o, n *img, at int64) {
	switch {
	case n.ok && !o.ok:
		is.existed, is.alive, is.bornAt = true, true, at
		is.n, is.prevN, is.nAt = n.n, n.n, at
	case n.ok:
		if !is.existed { // its creation was not seen: it was there before
			is.existed, is.alive, is.bornAt = true, true, math.MinInt64
			is.n, is.prevN = o.n, o.n
		}
		if n.n != is.n {
			is.prevN, is.n, is.nAt = is.n, n.n, at
		}
	case o.ok: // a REMOVE: its tc leaves the final items
		is.alive, is.diedAt = false, at
		for i := 0; i < c.nlim; i++ {
			is.gone[i] += o.tc[i] // 0 for a limit the item lacks
		}
	}
}

// shardZeroCreated is invariant 6 for a shard 0 item created with
// shard_count k by a write that knew the store as it was since from: a
// new bucket starts at one shard; a bucket whose shard 0 expired while
// other shards live on must be recreated at the count those shards were
// written at, which the limiter reads before it creates shard 0
// (docs/write-paths.md, "Shard 0 after expiry"). So k must be 1 or a count
// a shard that lived during [from, at] showed then, and not below the
// count of a shard that lived, at that count, all that time.
func (c *checker) shardZeroCreated(bi int32, k, from, at int64, pk string, seq uint64) {
	b := &c.buckets[bi]
	shown := k == 1
	var below *istate
	for _, ii := range b.items {
		s := &c.items[ii]
		if s.shard == 0 || !s.existed || (!s.alive && s.diedAt < from) {
			continue // no other shard, or gone before the write could look
		}
		if s.n == k || (s.nAt > from && s.prevN == k) {
			shown = true
		}
		if s.alive && s.bornAt <= from && s.nAt <= from && k < s.n {
			below = s
		}
	}
	switch {
	case below != nil:
		c.flag(InvDoubling, "%s created with shard_count %d although shard %d lived at %d shards all the while (from %s; seq %d at %s)",
			pk, k, below.shard, below.n, c.fmtT(from), seq, c.fmtT(at))
	case !shown:
		c.flag(InvDoubling, "%s created with shard_count %d, want 1 or the count of a shard of the bucket that lived (from %s; seq %d at %s)",
			pk, k, c.fmtT(from), seq, c.fmtT(at))
	case k > 1:
		c.ShardZeroRecreated++
	}
}

// wcuLow is how many write units a shard may still hold for a doubling
// to count as caused by it: the limiter decides from an image that is a
// round trip old, so a few dozen ms of refill is normal.
const wcuLow = 100

// hotRecent is how long ago a partition's last real throttle may be for a
// doubling to count as caused by it.
const hotRecent = int64(2 * time.Second)

func (c *checker) wcuRefill(is *istate, at int64) {
	if !is.wcuInit {
		is.wcuInit, is.wcuLevel, is.wcuAt = true, 1000, at
		return
	}
	if at > is.wcuAt {
		is.wcuLevel = math.Min(1000, is.wcuLevel+float64(at-is.wcuAt)/1e6)
		is.wcuAt = at
	}
}

// checkDoublingCause accepts a doubling when one of the bucket's shards
// was really at its write ceiling: its own writes exhausted an ideal wcu
// bucket (1000 a second), its partition was refused a write for being over
// its ceiling within hotRecent, or its partition is nearly out of write
// units now (failed conditional writes are billed too), or ran at
// proactiveRate or more recently (peakRate, or within doublingLag).
// Throttles injected by a fault plan do not count: they say nothing about
// the write rate.
func (c *checker) checkDoublingCause(bi int32, from, at int64, seq uint64) {
	lowest := math.Inf(1)
	for _, ii := range c.buckets[bi].items {
		is := &c.items[ii]
		c.wcuRefill(is, at)
		lowest = math.Min(lowest, is.wcuLevel)
		if is.throttled && at-is.throttledAt <= hotRecent {
			return
		}
	}
	if lowest <= wcuLow {
		return
	}
	fastest, lagging := 0.0, false
	for _, ii := range c.buckets[bi].items {
		fastest = math.Max(fastest, c.peakRate(&c.items[ii], at))
		// a doubling decided when the partition ran hot, refused by throttles until now
		lagging = lagging || c.items[ii].hotRateAt > 0 && at-c.items[ii].hotRateAt <= doublingLag
	}
	if fastest >= proactiveRate || lagging {
		return
	}
	avail := math.Inf(1)
	if c.PartitionAvailable != nil {
		for _, ii := range c.buckets[bi].items {
			avail = math.Min(avail, c.PartitionAvailable(c.items[ii].pk))
		}
		if avail <= wcuLow {
			return
		}
	}
	bm := &c.m.Buckets[bi]
	part := ""
	if !math.IsInf(avail, 1) {
		part = fmt.Sprintf(", its partitions held at least %.0f write units", avail)
	}
	if c.PartitionConsumed != nil {
		part += fmt.Sprintf(", the busiest ran at %.0f write units a second at most over %v windows of the last %v, and below %.0f in the %v before", fastest,
			time.Duration(rateWindow), time.Duration(rateLookback+rateWindow), proactiveRate, time.Duration(doublingLag))
	}
	c.flag(InvDoubling, "bucket %s/%s doubled %d -> %d at %s (seq %d) although no shard was at its write ceiling (the busiest shard's own writes left %.0f of 1000 write units%s, none was refused a write for its ceiling in the last %v)",
		bm.Entity, bm.Resource, from, 2*from, c.fmtT(at), seq, lowest, part, time.Duration(hotRecent))
}

// OpDone feeds a finished operation and the effects the stream showed for
// it (nil when none were accumulated).
func (c *checker) OpDone(op *operation, eff *effects) {
	if eff == nil {
		eff = &effects{}
	}
	if op.Bucket < 0 || int(op.Bucket) >= len(c.buckets) {
		c.flag(InvHarness, "op #%d names bucket %d, not in the model", op.ID, op.Bucket)
		return
	}
	if op.Outcome == outInvalid {
		c.flag(InvHarness, "op #%d (%s by client %d) was refused as invalid: the workload is wrong", op.ID, op.Kind, op.Client)
	}
	roles := c.m.roles(op.Bucket)
	if op.Kind == opAcquire && c.mode(op, eff) {
		return // decided by a mode: no write, nothing to account
	}
	for r, left := range op.LeftOut {
		// A resource an admit mode left out: the operation wrote neither
		// its bucket nor its parent's, and has nothing there to account.
		if left && roles[r] >= 0 {
			if eff.Changes[r] != 0 {
				bm := &c.m.Buckets[roles[r]]
				c.flag(InvModes, "op #%d (%s by client %d) left %s/%s out (admit mode) but wrote it %d times", op.ID, op.Kind, op.Client, bm.Entity, bm.Resource, eff.Changes[r])
			}
			roles[r] = -1
		}
	}
	if op.Kind != opAcquire && op.Mode == "admit" {
		// An adjust or rollback of a lease a mode admitted: it holds nothing.
		if eff.Changes != [maxRoles]uint64{} {
			c.flag(InvModes, "op #%d (%s by client %d) of a lease mode %s admitted wrote its buckets", op.ID, op.Kind, op.Client, op.Mode)
		}
		return
	}
	for r, bi := range roles {
		if bi >= 0 {
			c.account(op, r, bi)
		}
	}
	if op.Kind == opAcquire {
		c.allOrNothing(op, eff, roles)
	}
	if op.Retry != nil {
		c.liveness(op, eff, roles)
	}
	if op.Kind == opAcquire && op.Cancelled {
		c.cancelled(op)
	}
}

// mode judges an acquire against its bucket's modes (InvModes) and
// reports whether a mode decided it.
func (c *checker) mode(op *operation, eff *effects) bool {
	bm := &c.m.Buckets[op.Bucket]
	// The modes the acquire may act on: those of the spans that overlap
	// [Start - CacheTTL, End] (a cached read may be that old), of its
	// bucket and of the buckets it also charges (Workload.Also), each
	// resource's its own: a change may reach one resource's cached
	// configuration before another's.
	had := func(b int32, mode string) bool {
		modes := c.m.Buckets[b].Modes
		if len(modes) == 0 {
			return mode == ""
		}
		for i, sp := range modes {
			if (i+1 == len(modes) || modes[i+1].From >= op.Start-c.m.CacheTTL) && sp.From <= op.End && sp.Mode == mode {
				return true
			}
		}
		return false
	}
	all := append([]int32{op.Bucket}, bm.Also...)
	allowed := map[string]bool{}
	for _, b := range all {
		for _, m := range []string{"", "admit", "refuse", "shadow"} {
			allowed[m] = allowed[m] || had(b, m)
		}
	}
	bad := func(format string, args ...any) {
		c.flag(InvModes, "op #%d (acquire by client %d on %s/%s, %s, mode %q): "+format,
			append([]any{op.ID, op.Client, bm.Entity, bm.Resource, op.Outcome, op.Mode}, args...)...)
	}
	// A resource left out (Event.LeftOut), and every resource of an
	// acquire admit mode decided, had admit mode.
	roles := c.m.roles(op.Bucket)
	for r := 0; r < maxRoles; r += 2 {
		if b := roles[r]; b >= 0 && (op.LeftOut[r] || op.Mode == "admit") && !had(b, "admit") {
			bad("it left %s out, which had no admit mode within the cache TTL before it (it had %v)", c.m.Buckets[b].Resource, c.m.Buckets[b].Modes)
		}
	}
	decided := op.Outcome == outDisabled || op.Mode == "admit" || op.Mode == "refuse"
	switch {
	case op.Outcome == outCut || op.Outcome == outUnavailable && !decided:
		return decided // a store failure before any decision: nothing to judge
	case !allowed[op.Mode]:
		bad("its scope had none of that mode within the cache TTL before it (it had %v)", bm.Modes)
	case op.Mode == "admit" && op.Outcome != outAdmitted, op.Mode == "refuse" && op.Outcome != outDisabled,
		!decided && op.Outcome == outDisabled:
		bad("the mode and the outcome disagree")
	case op.ShadowRefused:
		bad("it was refused by shadow limits alone")
	}
	if decided && eff.Changes != [maxRoles]uint64{} {
		bad("it wrote its buckets (%d and %d changes)", eff.Changes[0], eff.Changes[1])
	}
	return decided
}

// cancelled judges an acquire whose caller cancelled its context and
// whose store calls met the cancellation: the context's error (or a
// refusal), never a lease, fail-open included; and a cascade's
// compensation runs all the same.
func (c *checker) cancelled(op *operation) {
	var what string
	switch {
	case op.UndoCancelled:
		what = "the compensation of its cascade was stopped by the cancelled context"
	case op.FailedOpen:
		what = "it was answered with a fail-open lease"
	case op.Outcome == outAdmitted:
		what = "it was answered with a lease"
	case op.Outcome == outUnavailable && !op.CtxErr:
		what = "its error does not wrap the context's"
	default:
		return
	}
	bm := &c.m.Buckets[op.Bucket]
	c.flag(InvCancelled, "op #%d (acquire by client %d on %s/%s): the caller cancelled, and %s", op.ID, op.Client, bm.Entity, bm.Resource, what)
}

// account adds an operation to invariant 1's expectations and to
// invariant 3's admissions.
func (c *checker) account(op *operation, r int, bi int32) {
	b := &c.buckets[bi]
	var it *istate // the item of the op's shard, when known (an admitted op's shard exists)
	if r == 0 && op.Shard >= 0 {
		for _, ii := range b.items {
			if c.items[ii].shard == op.Shard {
				it = &c.items[ii]
			}
		}
	}
	for i := 0; i < c.nlim; i++ {
		if !b.lim[i].ok {
			continue
		}
		a := op.Amount[i] * bucket.MilliPerToken
		if op.Skipped[r][i] && (op.Kind != opAcquire || op.Outcome == outAdmitted || op.Outcome == outRejected) {
			// A shadow limit the acquire skipped: not charged, nothing to
			// refund. (An acquire cut short or failed may have charged it
			// in a try before the one that skipped it, whose compensation
			// did not run.)
			a = 0
		}
		up, un := op.UnkPos[i]*bucket.MilliPerToken, op.UnkNeg[i]*bucket.MilliPerToken
		if r == 0 && c.m.Reservations {
			// What this operation's writes moved between a reservation pool
			// and the store is in the counters; what the pool answered is
			// not (it was counted when the pool took it).
			moved := (op.Reserved[i] - op.Returned[i]) * bucket.MilliPerToken
			unk := op.Unsettled[i] * bucket.MilliPerToken
			b.exact[i] += moved
			b.lo[i] += min(0, unk)
			b.hi[i] += max(0, unk)
			if moved != 0 || unk != 0 {
				b.itemUncertain = true
			}
			if op.Pooled {
				amt := a // an acquire's charge, a rollback's or negative adjust's refund
				if op.Kind == opRollback {
					amt = -a
				}
				if op.Outcome == outAdmitted && a != 0 && (amt < 0) == (op.Kind != opAcquire) {
					b.events[i] = append(b.events[i], admEvent{at: op.End, amt: amt})
				}
				continue
			}
		}
		if a == 0 && up == 0 && un == 0 {
			continue
		}
		ok := op.Outcome == outAdmitted
		if b.lim[i].cal != nil && op.Kind != opAcquire {
			// A settlement of a quota applies only while its acquire's
			// window lasts (a debt is forgiven, a refund moot, after it):
			// it may or may not have applied.
			lo, hi := min(0, a), max(0, a) // an adjust's delta, or nothing
			if op.Kind == opRollback {
				// a refund of a plus what the failed adjusts may have added
				lo, hi = min(0, -(a+up)), max(0, -(a+un))
			}
			b.lo[i] += lo
			b.hi[i] += hi
			b.itemUncertain = true
			continue
		}
		switch {
		case op.Kind == opAcquire && op.Outcome == outRejected:
			continue
		case op.Kind != opRollback && ok:
			b.exact[i] += a
		case op.Kind != opRollback: // may have applied (an acquire's a is never negative)
			b.lo[i] += min(0, a)
			b.hi[i] += max(0, a)
		case ok:
			b.exact[i] -= a
			b.lo[i] -= up
			b.hi[i] -= un
			if ok = up == 0 && un == 0; !ok {
				it = nil // the item's share is unknown from here on
			}
		default:
			b.lo[i] -= max(0, a+up)
			b.hi[i] -= min(0, a+un)
		}
		switch {
		case ok && it != nil && op.Kind == opRollback:
			it.exact[i] -= a
		case ok && it != nil:
			it.exact[i] += a
		default:
			b.itemUncertain = true
		}
	}
}

func (c *checker) allOrNothing(op *operation, eff *effects, roles [maxRoles]int32) {
	for r, bi := range roles {
		if bi < 0 {
			continue
		}
		b := &c.buckets[bi]
		if c.m.Reservations && r == 0 {
			c.pooledAllOrNothing(op, eff, bi)
			continue
		}
		switch op.Outcome {
		case outAdmitted:
			if eff.Changes[r] == 0 {
				c.flag(InvAllOrNothing, "op #%d (acquire by client %d) was admitted but wrote nothing to bucket %s/%s",
					op.ID, op.Client, c.m.Buckets[bi].Entity, c.m.Buckets[bi].Resource)
				continue
			}
			for i := 0; i < c.nlim; i++ {
				if !b.lim[i].ok {
					continue
				}
				want := op.Amount[i] * bucket.MilliPerToken
				if op.Skipped[r][i] {
					want = 0
				}
				if a := op.Amount[i] * bucket.MilliPerToken; a > 0 && eff.Net[r][i] > want && (eff.Net[r][i]-want)%a == 0 && (op.Stray || c.straddles(b.lim[i].cal, op)) {
					// Tries refused by shadow limits whose compensations
					// failed (op.Stray), or came after a quota's window ended
					// (see Rejected below), left their charges.
					b.exact[i] += eff.Net[r][i] - want
					b.itemUncertain = true
				} else if eff.Net[r][i] != want {
					c.flag(InvAllOrNothing, "op #%d (acquire by client %d) was admitted but changed %s/%s limit %s by %d millitokens, want %d",
						op.ID, op.Client, c.m.Buckets[bi].Entity, c.m.Buckets[bi].Resource, c.m.LimitNames[i], eff.Net[r][i], want)
				}
				if want > 0 {
					b.events[i] = append(b.events[i], admEvent{at: eff.LastApply[r], amt: want})
				}
			}
		case outRejected:
			for i := 0; i < c.nlim; i++ {
				if a := op.Amount[i] * bucket.MilliPerToken; a > 0 && eff.Net[r][i] == a && c.straddles(b.lim[i].cal, op) {
					// A charge its compensation left in a quota's window that
					// had ended (the refund is moot, see internal/engine's
					// quota.go): the next window starts at N whatever that one
					// took, so the caller sees no change; the total consumed
					// keeps it.
					b.exact[i] += a
					b.itemUncertain = true
					continue
				}
				if eff.Net[r][i] != 0 {
					c.flag(InvAllOrNothing, "op #%d (acquire by client %d) was rejected but changed %s/%s limit %s by %d millitokens",
						op.ID, op.Client, c.m.Buckets[bi].Entity, c.m.Buckets[bi].Resource, c.m.LimitNames[i], eff.Net[r][i])
				}
			}
		}
	}
}

// straddles reports whether a boundary of calendar cal (nil for a rate)
// fell within operation op, as the clocks within their spread saw it: a
// charge made before it and compensated after it stays in the window that
// ended.
func (c *checker) straddles(cal *bucket.Calendar, op *operation) bool {
	if cal == nil {
		return false
	}
	from, _ := cal.Bounds((c.base + op.Start - c.m.SkewSpread) / 1_000_000)
	to, _ := cal.Bounds((c.base+op.End+c.m.SkewSpread)/1_000_000 + 1)
	return from != to
}

// pooledAllOrNothing is invariant 5 for an acquire of a workload with
// reservations: its writes moved exactly its charge (unless a pool
// answered it) plus what it reserved, less what it returned; a refused one
// charged nothing.
func (c *checker) pooledAllOrNothing(op *operation, eff *effects, bi int32) {
	b := &c.buckets[bi]
	for i := 0; i < c.nlim; i++ {
		if !b.lim[i].ok {
			continue
		}
		want := (op.Reserved[i] - op.Returned[i]) * bucket.MilliPerToken
		switch op.Outcome {
		case outAdmitted:
			if !op.Pooled && !op.Skipped[0][i] {
				want += op.Amount[i] * bucket.MilliPerToken
				if want > 0 {
					b.events[i] = append(b.events[i], admEvent{at: eff.LastApply[0], amt: op.Amount[i] * bucket.MilliPerToken})
				}
			}
		case outRejected:
		default:
			continue // ambiguous
		}
		unk := op.Unsettled[i] * bucket.MilliPerToken // a write of unknown outcome may have moved it
		if net := eff.Net[0][i]; net < want+min(0, unk) || net > want+max(0, unk) {
			c.flag(InvAllOrNothing, "op #%d (acquire by client %d, %s) changed %s/%s limit %s by %d millitokens, want %d (charge %d, reserved %d, returned %d, unsettled %d, pooled %v)",
				op.ID, op.Client, op.Outcome, c.m.Buckets[bi].Entity, c.m.Buckets[bi].Resource, c.m.LimitNames[i], net, want,
				op.Amount[i], op.Reserved[i], op.Returned[i], op.Unsettled[i], op.Pooled)
		}
	}
}

func (c *checker) liveness(op *operation, eff *effects, roles [maxRoles]int32) {
	rt := op.Retry
	if rt.Start < c.m.TailStart+c.m.TailSettle || op.Start < rt.End+rt.RetryAfter {
		return
	}
	var other int64
	for r, bi := range roles {
		if bi < 0 {
			continue
		}
		if c.buckets[bi].shards > 1 {
			return // a retry may land on another shard than the one that refused
		}
		if rt.Local && c.buckets[bi].changedBy(op.Client, min(rt.Start-engine.LocalRefusalAge*int64(time.Millisecond), rt.Heard[r])) {
			// A refusal answered from the limiter's last items: its wait
			// assumed no one consumed since them. The item that refused
			// may predate the refusal by up to a second
			// (engine.LocalRefusalAge); another bucket of the acquire (a
			// cascade's parent, an Also resource) was judged from the
			// last item the process heard of it, of any age, or not at
			// all.
			return
		}
		other += int64(c.buckets[bi].changes - rt.Snapshot[r] - rt.Own[r] - eff.Changes[r])
	}
	if other != 0 {
		return // someone else wrote the bucket meanwhile
	}
	if op.Outcome != outAdmitted && op.Outcome != outRejected {
		return // a store failure: inconclusive
	}
	c.LivenessChecks++
	if op.Outcome == outRejected {
		bm := &c.m.Buckets[op.Bucket]
		by := func(parent bool) string {
			if parent {
				return " by the cascade parent"
			}
			return ""
		}
		c.flag(InvLiveness, "client %d waited the retry-after %v of rejection #%d%s on %s/%s and was rejected again%s at %s (retry-after now %v) although no one else wrote the bucket",
			op.Client, time.Duration(rt.RetryAfter), rt.Rejection, by(rt.ByParent), bm.Entity, bm.Resource, by(op.ByParent), c.fmtT(op.Start), time.Duration(op.RetryAfter))
	}
}

// Finish checks what needs the final state: invariant 1 against the
// store's items, and invariant 3's windows.
func (c *checker) Finish(items []store.Item) {
	if c.finished {
		return
	}
	c.finished = true
	// What the final items hold, then per item what its deletions took.
	tcs := make(map[int32][MaxLimits]int64)
	for _, it := range items {
		pk, ok := it.Str(store.AttrPK)
		if !ok {
			continue
		}
		if ii := c.item(pk); ii >= 0 {
			var im img
			c.decode(it, &im)
			tcs[ii] = im.tc
			c.items[ii].existed = true
		}
	}
	var sums = make([][MaxLimits]int64, len(c.buckets))
	for ii := range c.items {
		is := &c.items[ii]
		if !is.existed {
			continue
		}
		b := &c.buckets[is.bucket]
		for i := 0; i < c.nlim; i++ {
			got := tcs[int32(ii)][i] + is.gone[i]
			sums[is.bucket][i] += got
			if !b.itemUncertain && len(b.items) > 1 && b.lim[i].ok && got != is.exact[i] {
				c.flag(InvLostUpdate, "%s limit %s ends with tc = %d millitokens (%d of it in deleted items), but the operations on this shard add up to %d",
					is.pk, c.m.LimitNames[i], got, is.gone[i], is.exact[i])
			}
		}
	}
	for bi := range c.buckets {
		b := &c.buckets[bi]
		bm := &c.m.Buckets[bi]
		for i := 0; i < c.nlim; i++ {
			if !b.lim[i].ok {
				continue
			}
			lo, hi := b.exact[i]+b.lo[i], b.exact[i]+b.hi[i]
			if got := sums[bi][i]; got < lo || got > hi {
				if lo == hi {
					c.flag(InvLostUpdate, "bucket %s/%s limit %s ends with tc = %d millitokens over its shards, but the history adds up to %d",
						bm.Entity, bm.Resource, c.m.LimitNames[i], got, lo)
				} else {
					c.flag(InvLostUpdate, "bucket %s/%s limit %s ends with tc = %d millitokens over its shards, outside [%d, %d] that the history allows",
						bm.Entity, bm.Resource, c.m.LimitNames[i], got, lo, hi)
				}
			}
			if b.lim[i].cal == nil { // a quota's windows are checked as the writes come
				c.windows(bi, i)
			}
		}
	}
}

// windows checks invariant 3 for one bucket and limit: for every window
// [t1, t2] of apply times, admitted - refunded <= burst + rate x (t2 - t1)
// + rate x (skew spread + latency bound) + 2 millitokens of rounding.
// Admissions count at the apply time of their charging write, refunds
// (negative adjusts, rollbacks: only what the stream shows they returned)
// at the apply time of theirs; positive adjusts are left out (they may take
// a bucket into debt, which only lowers what is admitted later). One
// violation per bucket and limit reports the worst window.
func (c *checker) windows(bi int, i int) {
	b := &c.buckets[bi]
	ev := b.events[i]
	if len(ev) == 0 {
		return
	}
	// Events of one time are summed together below: their order does not
	// matter.
	slices.SortFunc(ev, func(x, y admEvent) int { return cmp.Compare(x.at, y.at) })
	l := b.lim[i]
	rate := float64(l.ra) / float64(l.rp) / 1e6 // millitokens per ns
	burst := float64(l.burst)
	slack := rate*float64(c.m.SkewSpread+c.latency) + 2
	var p float64
	m, mAt := math.Inf(-1), int64(0)
	worst, wFrom, wTo, wNet := 0.0, int64(0), int64(0), 0.0
	for j := 0; j < len(ev); {
		at := ev[j].at
		if v := rate*float64(at) - p; v > m {
			m, mAt = v, at
		}
		for ; j < len(ev) && ev[j].at == at; j++ {
			p += float64(ev[j].amt)
		}
		if ex := p - rate*float64(at) + m - burst; ex > slack && ex > worst {
			worst, wFrom, wTo = ex, mAt, at
			wNet = ex + burst + rate*float64(at-mAt)
		}
	}
	if worst > 0 {
		bm := &c.m.Buckets[bi]
		c.flag(InvOverAdmit, "bucket %s/%s limit %s admitted %s tokens net of refunds in [%s, %s], more than burst %s + rate x %s allows (by %s)",
			bm.Entity, bm.Resource, c.m.LimitNames[i], tokens(wNet), c.fmtT(wFrom), c.fmtT(wTo),
			tokens(burst), time.Duration(wTo-wFrom), tokens(worst))
	}
	b.events[i] = nil
}

func tokens(milli float64) string {
	return strconv.FormatFloat(milli/float64(bucket.MilliPerToken), 'f', 3, 64)
}

// checkDeterminism is invariant 8: two runs of the same configuration and
// seed must give the same trace hash.
func checkDeterminism(first, second string) []Violation {
	if first == second {
		return nil
	}
	return []Violation{{Invariant: InvDeterminism, Detail: "the same seed gave trace " + first + " and then " + second}}
}

// quotaWindows checks the quotas' part of one write of bucket b (the
// invariant InvQuota): the window it dates the quota at is a boundary of
// the quota's calendar within the clocks' spread and the latency bound of
// the write's time, the item expires after that window's end by every
// clock, and an acquire's charge leaves what acquires took of
// that window, net of the refunds to it, over all shards, at most the
// quota. A settlement's charge does not count: on a sharded bucket a debt
// is one shard's, and the other shards' acquires still take their shares
// (docs/limiter.md, "Shards and cascades"); invariant 4 keeps an indebted
// shard's own acquires out.
func (c *checker) quotaWindows(cause *cause, b *bstate, pk string, n *img, dtc *[MaxLimits]int64, at int64, seq uint64) {
	if !n.ok {
		return
	}
	for i := 0; i < c.nlim; i++ {
		cal := b.lim[i].cal
		if cal == nil || !n.has[i] || dtc[i] == 0 {
			continue
		}
		ws := n.ra[i]
		// The writer dated it on its clock when it sent the write, after
		// its operation started.
		skew := c.m.SkewSpread / 1_000_000
		now := (c.base + at) / 1_000_000 // Unix ms
		from := now
		if cause != nil {
			from = (c.base + cause.Start) / 1_000_000
		}
		lo, _ := cal.Bounds(from - skew - 1)
		hi, _ := cal.Bounds(now + skew + 1)
		if cause != nil && cause.Kind != opAcquire {
			lo = math.MinInt64 // a settlement, in its acquire's window
		}
		if s, _ := cal.Bounds(ws); s != ws || ws < lo || ws > hi {
			c.flag(InvQuota, "%s limit %s dated at window %s by a write at %s (seq %d)",
				pk, c.m.LimitNames[i], time.UnixMilli(ws).In(locOf(cal)), time.UnixMilli(now).In(locOf(cal)), seq)
		}
		// An item deleted within its window would start it again at the
		// quota: it expires after the window's end by every clock (the
		// limiter leaves an hour, docs/limiter.md; a window's start pushes
		// the expiry by an ADD, which another write's change of it since
		// the pusher's image may leave a second or so short).
		if _, end := cal.Bounds(ws); n.ttl != 0 && n.ttl*1000 < end+skew {
			c.flag(InvQuota, "%s limit %s in the window from %s expires at %s, before the window's end give or take the clocks' spread (seq %d at %s)",
				pk, c.m.LimitNames[i], time.UnixMilli(ws).In(locOf(cal)), time.Unix(n.ttl, 0).In(locOf(cal)), seq, c.fmtT(at))
		}
		if dtc[i] > 0 && cause != nil && cause.Kind != opAcquire {
			// A settlement's charge (a debt) is its shard's: it refuses
			// that shard's acquires (invariant 4), not the others' shares.
			continue
		}
		key := [2]int64{int64(i), ws}
		b.quotaNet[key] += dtc[i]
		if cause != nil && cause.Kind == opAcquire && dtc[i] > 0 && b.quotaNet[key] > b.lim[i].burst {
			c.flag(InvQuota, "op #%d (acquire by client %d) took %s limit %s to %s in the window from %s, above its quota %s (seq %d at %s)",
				cause.Op, cause.Client, pk, c.m.LimitNames[i], tokens(float64(b.quotaNet[key])),
				time.UnixMilli(ws).In(locOf(cal)), tokens(float64(b.lim[i].burst)), seq, c.fmtT(at))
		}
	}
}

func locOf(cal *bucket.Calendar) *time.Location {
	if cal.Loc == nil {
		return time.UTC
	}
	return cal.Loc
}
