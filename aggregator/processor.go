package aggregator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Defaults of [Options].
const (
	// DefaultHotPercent: shard 0 counts as hot when, over the meter's
	// window, it used more than 80 % of what its wcu limit refills.
	DefaultHotPercent = 20
	// DefaultMaxShards is the limiter's own ceiling on a bucket's shard
	// count (256 partitions absorb 256,000 writes a second).
	DefaultMaxShards = keys.MaxShards
	// DefaultShardCooldown is how long, after a bucket's shard count
	// grew, the aggregator waits before it doubles it again: one
	// FineWindow, so that the rate it judges was measured at the new
	// count. (With whole-second record times, the records of the second
	// it grew in are skipped and the next second's are judged alone.)
	DefaultShardCooldown = FineWindow
)

// MinRetention is the shortest snapshot retention allowed: longer than
// DynamoDB Streams keeps a record (24 hours), so that no record can be
// redelivered after the snapshot that absorbed it has expired.
const MinRetention = 25 * time.Hour

// Options configures a [Processor]. The zero Options is the default
// configuration.
type Options struct {
	// Windows are the snapshot windows to write (default, when empty,
	// DefaultWindows: hourly and daily). An invalid or repeated window is
	// an error of New.
	Windows []Window
	// Retention says how long snapshots of a window live after the window
	// ends (their ttl attribute). A window missing from the map gets
	// DefaultRetention; zero or negative means the snapshots never expire;
	// anything else must be at least MinRetention.
	Retention map[Window]time.Duration
	// Namespaces, when not empty, restricts the processor to the buckets
	// of these namespaces; records of others are ignored. An empty name
	// in it is an error of New.
	Namespaces []string
	// HotPercent is the threshold of proactive sharding: shard 0 is hot
	// when, over the meter's window (FineWindow, or MeterWindow for
	// records with whole-second times), it consumed more than
	// 100 - HotPercent percent of what its wcu limit refills in that time
	// (its wcu balance would then be below HotPercent percent of
	// capacity). 0 means DefaultHotPercent; negative disables proactive
	// sharding; above 100 is an error of New.
	HotPercent int
	// MaxShards caps the shard count the processor doubles to; 0 means
	// DefaultMaxShards, and a negative count is an error of New.
	MaxShards int64
	// ShardCooldown is the minimum time, by record times, between a
	// bucket's shard count growing and the processor doubling it again
	// (0: DefaultShardCooldown; negative: none). Without it, the
	// meter, still full of writes from before the doubling, would double
	// again at once.
	ShardCooldown time.Duration
	// ReportMalformed makes HandleLambda report malformed records as
	// failures, which Lambda retries until they expire (blocking their
	// stream shard), instead of logging and skipping them.
	ReportMalformed bool
	// Logger receives doublings and propagations (Info) and skipped or
	// failed records (Warn, Error). nil means slog.Default().
	Logger *slog.Logger
}

// Processor applies batches of change stream records to a store: usage
// snapshots, proactive sharding and shard-count propagation. Create one per
// consumer with [New] and feed it every batch; it remembers, per bucket,
// the last shard count it saw (bounded), to pace proactive doublings.
//
// Process may be called from several goroutines, but a Processor starts
// none and holds no lock during a store call.
//
// The zero Processor is not usable: create one with New. Process and
// HandleLambda of a nil or zero Processor, or with a nil ctx, fail every
// record (not as malformed: Lambda retries them) and change nothing.
type Processor struct {
	st              store.Store
	windows         []Window
	retention       [4]time.Duration
	namespaces      map[string]bool
	hotPercent      int64
	maxShards       int64
	cooldown        time.Duration
	reportMalformed bool
	log             *slog.Logger

	mu    sync.Mutex
	known map[string]shardState
}

// shardState is what a Processor remembers of one bucket: the highest
// shard count seen, when (by record time) it was seen to grow, and the
// newest record that showed it.
type shardState struct {
	count int64
	since time.Time
	seq   string // the newest record the state reflects (EncodeSeq form)

	// The write meter of shard 0 (see meter): write units (millitokens)
	// used per slot of slotMs, for the slots numbered slot[i], and the
	// newest record charged to it.
	used     [meterSlots]int64
	slot     [meterSlots]int64
	meterSeq string
}

// The meter: meterSlots slots of slotMs each. It judges the last
// FineWindow when records carry sub-second times (memsim's stream; Kinesis
// Data Streams for DynamoDB at millisecond precision), the last
// MeterWindow when they carry whole seconds, as DynamoDB Streams records
// in Lambda do: when rf does not move (consumption-only writes), a
// second's records then land in one slot, and a shorter window would see a
// second's writes as its own.
const (
	meterSlots = 4
	fineSlots  = 2
	slotMs     = 250
	// MeterWindow is the window over which the aggregator measures shard
	// 0's write rate from records with whole-second times.
	MeterWindow = meterSlots * slotMs * time.Millisecond
	// FineWindow is the window for records with sub-second times.
	FineWindow = fineSlots * slotMs * time.Millisecond
)

// maxKnown bounds the per-bucket memory of a Processor.
const maxKnown = 1 << 14

// New returns a Processor writing to st. A nil st, or an Options field
// out of its range (see Options), is an error.
func New(st store.Store, opts Options) (*Processor, error) {
	if st == nil {
		return nil, errors.New("aggregator: store must not be nil")
	}
	p := &Processor{st: st, reportMalformed: opts.ReportMalformed, log: cmp.Or(opts.Logger, slog.Default()),
		known: make(map[string]shardState)}
	p.windows = opts.Windows
	if len(p.windows) == 0 {
		p.windows = DefaultWindows
	}
	p.windows = append([]Window(nil), p.windows...)
	for i, w := range p.windows {
		if !keys.UsageWindow(w).Valid() {
			return nil, fmt.Errorf("aggregator: invalid window %v", w)
		}
		if slices.Contains(p.windows[:i], w) {
			return nil, fmt.Errorf("aggregator: window %v given twice", w)
		}
		p.retention[w] = DefaultRetention(w)
		if d, ok := opts.Retention[w]; ok {
			if d > 0 && d < MinRetention {
				// A snapshot gone before the stream's records are would be
				// recreated by a redelivery, without its high-water mark.
				return nil, fmt.Errorf("aggregator: retention of %v snapshots is %v; want 0 (never expire) or at least %v", w, d, MinRetention)
			}
			p.retention[w] = d
		}
	}
	slices.Sort(p.windows)
	for _, ns := range opts.Namespaces {
		if ns == "" {
			return nil, errors.New("aggregator: empty namespace in Namespaces")
		}
		if p.namespaces == nil {
			p.namespaces = make(map[string]bool)
		}
		p.namespaces[ns] = true
	}
	switch {
	case opts.HotPercent > 100:
		return nil, fmt.Errorf("aggregator: HotPercent %d is above 100", opts.HotPercent)
	case opts.MaxShards < 0:
		return nil, fmt.Errorf("aggregator: MaxShards %d is negative", opts.MaxShards)
	}
	// Zero is the default; a negative HotPercent or ShardCooldown is off.
	p.hotPercent = max(int64(cmp.Or(opts.HotPercent, DefaultHotPercent)), 0)
	p.maxShards = cmp.Or(opts.MaxShards, DefaultMaxShards)
	p.cooldown = max(cmp.Or(opts.ShardCooldown, DefaultShardCooldown), 0)
	return p, nil
}

// Result is the outcome of one batch.
type Result struct {
	// Failures lists the records that were not fully applied, in batch
	// order. Redeliver them (with everything after them, as Lambda does,
	// or alone): every write is idempotent per record.
	Failures []Failure
	// Stats counts what the batch did.
	Stats Stats
}

// Failure is one record that was not fully applied.
type Failure struct {
	// Index is the record's position in the batch.
	Index int
	// SequenceNumber and EventID are the record's (Lambda's partial-batch
	// response identifies a DynamoDB Streams record by its sequence
	// number).
	SequenceNumber string
	EventID        string // for logs
	// Err is why: a *MalformedError (retrying cannot help) or the store's
	// error.
	Err error
}

// Malformed reports whether the record failed because it cannot be
// interpreted, rather than because a write failed.
func (f Failure) Malformed() bool { return errors.Is(f.Err, ErrMalformed) }

// Stats counts what one batch did.
type Stats struct {
	// Records is the number of records in the batch.
	Records int
	// Ignored counts records of other items (or other namespaces).
	Ignored int
	// Duplicates counts records that appeared more than once in the batch
	// (same item, same sequence number); only the first is processed.
	Duplicates int
	// Deltas counts the consumption deltas extracted.
	Deltas int
	// SnapshotWrites counts snapshot updates that applied.
	SnapshotWrites int
	// AlreadyApplied counts (record, snapshot) pairs skipped because the
	// snapshot's high-water mark showed the record applied already: the
	// redeliveries caught.
	AlreadyApplied int
	// Doublings counts shard counts this processor doubled; DoublingsLost
	// the doublings another writer made first.
	Doublings, DoublingsLost int
	// Propagated counts shard items whose shard_count was raised;
	// PropagationsThrottled the raises skipped because the shard's
	// partition throttled them (its clients learn the count anyway).
	Propagated, PropagationsThrottled int
	// Consumed is the capacity the batch's store calls consumed.
	Consumed store.Capacity
}

// entry is one bucket record of a batch.
type entry struct {
	idx    int
	r      *Record
	b      keys.Bucket
	pk     string
	seq    string // EncodeSeq form
	at     time.Time
	deltas []Delta
	dupOf  int   // batch index of the first occurrence, or -1
	latest int64 // shard 0: the highest shard count any record of the batch shows
}

// usable returns an error for a nil or zero Processor or a nil ctx.
func (p *Processor) usable(ctx context.Context) error {
	switch {
	case p == nil || p.st == nil:
		return errors.New("aggregator: the Processor is nil or zero: create one with New")
	case ctx == nil:
		return errors.New("aggregator: ctx is nil: pass a context (context.Background() when there is none)")
	}
	return nil
}

// Process applies a batch of records: it extracts the consumption deltas
// and adds them to the usage snapshots, doubles hot buckets and
// propagates shard counts, and reports the records it could not apply.
//
// Delivery contract (what Lambda does): when a record is processed, every
// earlier record of the same item has been processed without failure, or is
// in the same batch (within a batch, records are put in sequence-number
// order per item). Records of different items may come in any order, and a
// record processed without failure may come again at any time: it is not
// counted twice. A failed record must be delivered again before any later
// record of its item; if it comes after a later record was applied to the
// same snapshot, its consumption is skipped (under-counted, never
// double-counted).
//
// Writes are issued in an order fixed by the batch's content: items by
// key, each item's records by sequence number.
func (p *Processor) Process(ctx context.Context, recs []Record) Result {
	res := Result{Stats: Stats{Records: len(recs)}}
	if err := p.usable(ctx); err != nil {
		for i, r := range recs {
			res.Failures = append(res.Failures, Failure{Index: i, SequenceNumber: r.SequenceNumber, EventID: r.EventID, Err: err})
		}
		return res
	}
	errs := make([]error, len(recs))
	var es []*entry
	for i := range recs {
		e, err := p.parse(i, &recs[i])
		if err != nil {
			errs[i] = err
			continue
		}
		if e == nil {
			res.Stats.Ignored++
			continue
		}
		res.Stats.Deltas += len(e.deltas)
		es = append(es, e)
	}
	slices.SortStableFunc(es, func(a, b *entry) int {
		return cmp.Or(strings.Compare(a.pk, b.pk), keys.CompareEncodedSeq(a.seq, b.seq))
	})
	for i, e := range es {
		if i > 0 && es[i-1].pk == e.pk && es[i-1].seq == e.seq {
			e.dupOf = es[i-1].idx
			if es[i-1].dupOf >= 0 {
				e.dupOf = es[i-1].dupOf
			}
			res.Stats.Duplicates++
			res.Stats.Deltas -= len(e.deltas)
		}
	}
	fail := func(idx int, err error) {
		if errs[idx] == nil {
			errs[idx] = err
		}
	}

	// Usage snapshots: one conditional ADD per (shard item, window) touched.
	for _, g := range p.groups(es) {
		failed, err := p.writeSnapshot(ctx, g, &res.Stats)
		for _, e := range failed {
			fail(e.idx, err)
		}
	}
	// Shard 0: proactive sharding and propagation, record by record. A
	// record whose shard count a later record of the batch already exceeds
	// is stale: it must not double.
	latest := make(map[string]int64)
	for _, e := range es {
		if e.b.Shard == 0 && e.r.New != nil {
			latest[e.pk] = max(latest[e.pk], keys.ShardCount(e.r.New))
		}
	}
	for _, e := range es {
		e.latest = latest[e.pk]
		if e.dupOf >= 0 || e.b.Shard != 0 || e.r.EventName == EventRemove {
			continue
		}
		if err := p.shardZero(ctx, e, &res.Stats); err != nil {
			fail(e.idx, err)
		}
	}
	for _, e := range es {
		if e.dupOf >= 0 {
			errs[e.idx] = errs[e.dupOf]
		}
	}
	for i, err := range errs {
		if err != nil {
			res.Failures = append(res.Failures, Failure{Index: i, SequenceNumber: recs[i].SequenceNumber,
				EventID: recs[i].EventID, Err: err})
		}
	}
	return res
}

// parse validates one record; it returns nil and no error for a record the
// processor ignores.
func (p *Processor) parse(i int, r *Record) (*entry, error) {
	b, ok, err := checkRecord(*r)
	if err != nil {
		return nil, err
	}
	if !ok || p.namespaces != nil && !p.namespaces[b.Namespace] {
		return nil, nil
	}
	seq, err := keys.EncodeSeq(r.SequenceNumber)
	if err != nil {
		return nil, malformed("SequenceNumber", strconv.Quote(r.SequenceNumber)+": "+err.Error())
	}
	e := &entry{idx: i, r: r, b: b, pk: r.Keys.PK, seq: seq, dupOf: -1}
	if r.EventName == EventRemove {
		return e, nil
	}
	if e.at, err = recordTime(*r); err != nil {
		return nil, err
	}
	if e.deltas, err = extractDeltas(*r, b, e.at); err != nil {
		return nil, err
	}
	return e, nil
}

// learn records that a bucket's shard 0 showed count in the record with
// (encoded) sequence number seq, at time at. Records older than what is
// known teach nothing. reset (shard 0 was created, for instance again
// after it expired) forgets what was known before; grew says the count
// just grew, which starts the cooldown.
func (p *Processor) learn(pk, seq string, count int64, at time.Time, reset, grew bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.known[pk]
	if ok {
		if c := keys.CompareEncodedSeq(seq, k.seq); c < 0 || c == 0 && reset {
			return
		}
	}
	switch {
	case !ok || reset:
		if !ok && len(p.known) >= maxKnown {
			clear(p.known) // start over rather than grow without bound
		}
		k = shardState{count: count}
		if grew {
			k.since = at
		}
	case count > k.count:
		// It grew since we last looked, at some time before this record.
		k.count, k.since = count, at
	case count == k.count && grew && at.After(k.since):
		k.since = at
	}
	k.seq = seq
	p.known[pk] = k
}

// meter adds the write units one record shows consumed (its wcu tc
// delta, millitokens) to shard 0's meter at atMs, and returns the units
// used within the last `slots` slots (1 to meterSlots). The item's own wcu
// balance cannot serve: full writes forgive it (docs/write-paths.md); its
// tc counter counts every write unit exactly. A record already charged (a
// redelivery) changes nothing.
func (p *Processor) meter(pk, seq string, used, atMs int64, slots int64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.known[pk]
	now := atMs / slotMs
	if k.meterSeq == "" || keys.CompareEncodedSeq(seq, k.meterSeq) > 0 {
		i := now % meterSlots
		if k.slot[i] != now {
			k.slot[i], k.used[i] = now, 0
		}
		k.used[i] += used
		k.meterSeq = seq
		p.known[pk] = k
	}
	sum := int64(0)
	for i := range k.used {
		if k.slot[i] > now-slots && k.slot[i] <= now {
			sum += k.used[i]
		}
	}
	return sum
}

func (p *Processor) knownState(pk string) (shardState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, ok := p.known[pk]
	return k, ok
}
