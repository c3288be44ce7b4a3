package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter/aggregator"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// InvUsageTotals is the name under which the aggregator actor reports a
// usage snapshot total that differs from the change stream's tc deltas.
const InvUsageTotals = "aggregator-usage-totals"

// aggregatorWorkload is the aggregator scenario's workload: hot-entity,
// shorter (10 s plus the tail), so that a run takes a few seconds of wall
// time. The aggregator itself is an Actor: see NewAggregatorActor.
func aggregatorWorkload(cfg Config) *Workload {
	w := hotEntity(cfg)
	w.Duration = 10 * time.Second
	return w
}

// AggregatorActor runs an aggregator.Processor in the simulation, against
// the simulated store, as a Lambda trigger would: every 100 to 500 ms of
// virtual time (seeded) it delivers the bucket records of the change
// stream it has not delivered yet to Process, redelivering a failed record
// (with every later record of its item) at the next delivery, before
// anything newer of that item, and now and then a whole earlier batch
// again (at-least-once duplicates). Its store calls go
// through the scheduler like a client's.
//
// When the simulation ends it delivers what is left directly to the store
// (outside simulated time, proactive sharding off) and checks that every
// usage snapshot total, per bucket, limit and window summed over shards,
// equals the sum of the tc changes the stream showed (wcu excluded); a
// difference is a violation named InvUsageTotals.
type AggregatorActor struct {
	// Options configure the Processor (zero: the defaults). The logger
	// defaults to the simulation's.
	Options aggregator.Options
	// MinEvery and MaxEvery bound the pause between deliveries (default
	// 100 ms and 500 ms); BatchSize caps a Process call (default: no cap,
	// one batch per delivery, as a batching window gathers them: a
	// batch's snapshot writes grow with the shards, not the records);
	// DupProb is the probability that a delivery is followed by an earlier
	// batch again (default 0.1; negative: never).
	MinEvery, MaxEvery time.Duration
	BatchSize          int
	DupProb            float64

	s       *Sim
	pending []aggregator.Record // not yet delivered (failed ones first)
	history [][]aggregator.Record
	want    map[usageCell]int64 // tc deltas seen on the stream
	stats   AggregatorStats
}

// AggregatorStats is what an AggregatorActor did.
type AggregatorStats struct {
	// Deliveries counts Process calls in simulated time, Duplicates those
	// that redelivered an earlier batch, Redelivered the records sent
	// again after a failure.
	Deliveries, Duplicates, Redelivered int
	// Records counts bucket records received from the stream.
	Records int
	// Doublings counts the shard counts the processor doubled,
	// AlreadyApplied the redeliveries its high-water marks caught.
	Doublings, AlreadyApplied int
	// FlushRecords is what was left for the final flush, FlushFailed
	// the records whose redelivery still failed there (propagations to
	// throttled shards).
	FlushRecords, FlushFailed int
	// Cells counts the (bucket, limit, window) totals checked, Mismatches
	// those that differed; Consumed the millitokens checked (hourly).
	Cells, Mismatches int
	Consumed          int64
}

// usageCell is one usage total: a bucket (all shards), a limit, a window.
type usageCell struct {
	ns, entity, resource, limit string
	window                      keys.UsageWindow
	start                       int64 // Unix ns
}

// NewAggregatorActor returns an aggregator actor with the default options.
// An actor serves one run.
func NewAggregatorActor() *AggregatorActor { return &AggregatorActor{} }

// Name implements Actor.
func (a *AggregatorActor) Name() string { return "aggregator" }

// Stats returns what the actor did (complete once the run has ended).
func (a *AggregatorActor) Stats() AggregatorStats {
	if a == nil {
		return AggregatorStats{}
	}
	return a.stats
}

// Records implements Actor: it queues the bucket records (the trigger's
// SK = #STATE filter) and adds up their tc deltas for the final check,
// from the images themselves, independently of the aggregator.
func (a *AggregatorActor) Records(recs []memsim.Record) {
	if a == nil {
		return
	}
	windows := a.Options.Windows
	if len(windows) == 0 {
		windows = aggregator.DefaultWindows
	}
	for i := range recs {
		r := &recs[i]
		if r.Keys.SK != keys.SKBucket {
			continue
		}
		b, ok := keys.ParseBucketPK(r.Keys.PK)
		if !ok {
			continue
		}
		a.stats.Records++
		old, new := r.Old, r.New
		a.pending = append(a.pending, aggregator.FromStream(strconv.FormatUint(r.Seq, 10), r.Event, r.Keys, old, new, r.At))
		if new == nil { // REMOVE: no consumption
			continue
		}
		if a.want == nil {
			a.want = make(map[usageCell]int64)
		}
		for name, nv := range new.Numbers() {
			limit, ok := tcLimit(name)
			if !ok {
				continue
			}
			ov, _ := old.Int(name) // 0 for an INSERT (no old image)
			if nv == ov {
				continue
			}
			for _, w := range windows {
				kw := keys.UsageWindow(w)
				a.want[usageCell{b.Namespace, b.Entity, b.Resource, limit, kw, kw.Start(r.At).UnixNano()}] += nv - ov
			}
		}
	}
}

// tcLimit returns the limit whose total-consumed counter attribute
// b_{limit}_tc is, except the hidden wcu.
func tcLimit(attr string) (string, bool) {
	if !strings.HasPrefix(attr, "b_") || !strings.HasSuffix(attr, "_tc") || len(attr) <= len("b__tc") {
		return "", false
	}
	l := attr[len("b_") : len(attr)-len("_tc")]
	return l, l != keys.HiddenLimit
}

// Run implements Actor.
func (a *AggregatorActor) Run(env *Env) {
	if a == nil || env == nil || env.c == nil {
		return
	}
	a.s = env.c.s
	minE, maxE := orDefault(a.MinEvery, 100*time.Millisecond), a.MaxEvery
	if maxE < minE {
		maxE = max(5*minE, 500*time.Millisecond)
	}
	dup := a.DupProb
	if dup == 0 {
		dup = 0.1
	}
	opts := a.Options
	if opts.Logger == nil {
		opts.Logger = a.s.logger()
	}
	p, err := aggregator.New(env.Store(), opts)
	if err != nil {
		a.flag(InvHarness, "aggregator actor: %v", err)
		return
	}
	rng := env.Rand()
	ctx := context.Background()
	for !a.s.stopping {
		if !env.Sleep(minE + time.Duration(rng.Int64N(int64(maxE-minE)+1))) {
			break
		}
		a.tick(ctx, p)
		if len(a.history) > 0 && dup > 0 && rng.Float64() < dup && !a.s.stopping {
			// An earlier batch again: every record in it was processed
			// without failure, so it may come at any time.
			old := a.history[rng.IntN(len(a.history))]
			res := p.Process(ctx, slices.Clone(old))
			a.stats.Duplicates++
			a.count(res)
		}
	}
	a.finish()
}

// tick delivers everything pending, in batches. A failed record is held
// back for the next tick with every later record of its item (the
// redelivery rule: it goes before them); records of other items go on.
func (a *AggregatorActor) tick(ctx context.Context, p *aggregator.Processor) {
	// What arrives while this delivery runs waits for the next one.
	todo := a.pending
	a.pending = nil
	size := a.BatchSize
	if size <= 0 {
		size = len(todo)
	}
	blocked := make(map[store.Key]bool)
	var held []aggregator.Record
	for len(todo) > 0 && !a.s.stopping {
		var batch []aggregator.Record
		n := 0
		for ; n < len(todo) && len(batch) < size; n++ {
			if r := todo[n]; blocked[r.Keys] {
				held = append(held, r)
			} else {
				batch = append(batch, r)
			}
		}
		todo = todo[n:]
		if len(batch) == 0 {
			continue
		}
		res := p.Process(ctx, batch)
		a.stats.Deliveries++
		a.count(res)
		first := make(map[store.Key]int, len(res.Failures))
		for _, f := range res.Failures {
			k := batch[f.Index].Keys
			if i, ok := first[k]; !ok || f.Index < i {
				first[k] = f.Index
			}
			blocked[k] = true
		}
		var done []aggregator.Record
		for i, r := range batch {
			if j, ok := first[r.Keys]; ok && i >= j {
				held = append(held, r)
				a.stats.Redelivered++
			} else {
				done = append(done, r)
			}
		}
		if len(done) > 0 {
			a.history = append(a.history, done)
			if len(a.history) > 8 {
				a.history = a.history[1:]
			}
		}
	}
	// Held records are older than anything that arrived meanwhile.
	a.pending = append(append(held, todo...), a.pending...)
}

func (a *AggregatorActor) count(res aggregator.Result) {
	a.stats.Doublings += res.Stats.Doublings
	a.stats.AlreadyApplied += res.Stats.AlreadyApplied
}

func (a *AggregatorActor) flag(inv, format string, args ...any) {
	if a.s != nil && a.s.chk != nil {
		a.s.chk.flag(inv, format, args...)
	}
}

// finish delivers what is left straight to the store (the simulation has
// ended: no latency, no scheduler) and checks the usage totals.
func (a *AggregatorActor) finish() {
	opts := a.Options
	opts.HotPercent = -1 // no doubling after the end
	opts.Logger = a.s.logger()
	p, err := aggregator.New(a.s.st, opts)
	if err != nil {
		a.flag(InvHarness, "aggregator actor: %v", err)
		return
	}
	a.stats.FlushRecords = len(a.pending)
	ctx := context.Background()
	// Store time does not move any more: a write throttled now stays
	// throttled. Such failures are shard-count propagations to hot shards
	// (snapshots live in their own partition); the check below shows
	// whether any usage was missed.
	for tries := 0; len(a.pending) > 0 && tries < 3; tries++ {
		res := p.Process(ctx, a.pending)
		a.count(res)
		if len(res.Failures) == 0 {
			a.pending = nil
			break
		}
		a.pending = a.pending[res.Failures[0].Index:]
	}
	a.stats.FlushFailed = len(a.pending)
	a.check(a.s.st.Items())
}

// check compares the snapshot items' totals with the stream's deltas.
func (a *AggregatorActor) check(items []store.Item) {
	got := make(map[usageCell]int64)
	for _, it := range items {
		pk, _ := it.Str(store.AttrPK)
		sk, _ := it.Str(store.AttrSK)
		ns, entity, ok := strings.Cut(pk, "/USAGE#")
		if !ok {
			continue
		}
		w, resource, start, _, ok := keys.ParseUsageSK(sk)
		if !ok {
			continue
		}
		for name, v := range it.Numbers() {
			if limit, events, ok := keys.ParseUsageAttr(name); ok && !events {
				got[usageCell{ns, entity, resource, limit, w, start.UnixNano()}] += v
			}
		}
	}
	cells := slices.Collect(maps.Keys(a.want))
	for c := range got {
		if _, ok := a.want[c]; !ok {
			cells = append(cells, c)
		}
	}
	slices.SortFunc(cells, func(x, y usageCell) int {
		return strings.Compare(fmt.Sprint(x), fmt.Sprint(y))
	})
	for _, c := range cells {
		a.stats.Cells++
		if c.window == keys.WindowHour {
			a.stats.Consumed += a.want[c]
		}
		if g, w := got[c], a.want[c]; g != w {
			a.stats.Mismatches++
			a.flag(InvUsageTotals, "%s/%s/%s limit %s, %s window from %s: snapshots hold %d millitokens, the stream's tc deltas add up to %d",
				c.ns, c.entity, c.resource, c.limit, c.window, time.Unix(0, c.start).UTC().Format(time.RFC3339), g, w)
		}
	}
}

var _ Actor = (*AggregatorActor)(nil)
