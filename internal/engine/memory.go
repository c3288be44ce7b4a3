package engine

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Memory is what a client knows of the buckets it has written: each
// bucket's shard count, the last image of each shard and when it came,
// estimates of the shard's write rate (all writers, and the others
// without this client), recent throttles, and doublings in progress. It is
// safe for concurrent use and bounded: past its size it forgets the
// bucket least recently used, which costs that bucket one blind write that
// may fail, never a wrong answer.
//
// Memory does no I/O and reads no clock: every method that needs the
// time takes it (Unix ms, the client's clock).
type Memory struct {
	mu      sync.Mutex
	buckets *simplelru.LRU[bucketID, *bucketInfo] // entries leave by use, not by age

	// Table-wide throttles, to tell a storm (many buckets throttled at
	// once) from a hot partition (one bucket).
	storm stormWindow

	// What first writes of each plan (by its hash), and of any plan,
	// found: see prior.go.
	plans   map[int64]*prior
	anyPlan prior
}

// DefaultMemorySize is how many buckets a Memory remembers by default.
const DefaultMemorySize = 1 << 16

// NewMemory returns a Memory of at most size buckets (DefaultMemorySize
// when size < 1).
func NewMemory(size int) *Memory {
	if size < 1 {
		size = DefaultMemorySize
	}
	buckets, _ := simplelru.NewLRU[bucketID, *bucketInfo](size, nil) // errs only for size < 1
	return &Memory{buckets: buckets}
}

type bucketID struct{ entity, resource string }

func idOf(ref keys.Bucket) bucketID { return bucketID{ref.Entity, ref.Resource} }

type bucketInfo struct {
	n      int64
	grewAt int64 // ms, when n last grew in this memory (0: never)
	// vouched is until when (ms, this client's clock) the last image of
	// shard 0 vouches that shard 0 exists (see trustsCount); 0: none.
	vouched int64
	// The shards' entries: shard 0's in the bucket's own allocation (zero
	// points to s0 once made), the others in more (nil until one is). Most
	// buckets have one shard: their entry costs no map and no allocation
	// of its own.
	zero *shardInfo
	s0   shardInfo
	more map[int]*shardInfo
	// doubling is the count this client decided to double from while its
	// doubling write was refused by a throttle; every acquire of the
	// bucket tries the doubling first until it lands, someone else's
	// doubling is learned, or doublingUntil passes.
	doubling      int64
	doublingUntil int64
}

type shardInfo struct {
	key store.Key // the shard's item (set once, by shardOf)
	img *Image
	at  int64 // when this client received img (its clock)
	// Estimates from the client's images of the shard, over at least
	// rateWindowMs, measured on the client's own clock (skew cancels):
	// write units per ms of all writers (rate) and of the others (others),
	// from the hidden limit's total consumed; and per limit, the
	// millitokens per ms the other writers consume (drain), from each
	// limit's total consumed. rateAt is when they were taken. drain is
	// never changed once made (each estimate makes a new one): views share
	// it.
	rate, others float64
	drain        map[string]float64
	rateAt       int64
	provisional  bool // rate and others from a window shorter than a whole one
	// The reference image the next estimate counts from, and what this
	// client's own writes added since: write units, and consumption per
	// limit (millitokens).
	ref   *Image
	refAt int64
	ownW  int64
	ownTc tally
	// pending is what this process's writes in flight charge per limit
	// (millitokens, only those above 0): a write decided but not answered
	// yet; inflight counts those writes.
	pending  tally
	inflight int
	// The first backing arrays of ownTc and pending (a bucket has few
	// limits): a shard's first writes allocate nothing for them.
	tcBuf, pendingBuf [3]namedAmount
	// unbilled counts this client's recent failed writes to the shard
	// that no later write of its charged to the hidden limit yet (the last
	// at unbilledAt): the next write charges them, so that the shard's
	// write units count what the partition billed.
	unbilled, unbilledAt int64
	// promise is when the last refusal on this shard said the request
	// would fit (ms, 0 for none): from then on the store is asked, so that
	// waiting a refusal's wait and trying again is never refused by a
	// guess.
	promise  int64
	binding  bool // the promise came from a throttle (ShardView.Binding)
	throttle throttleWindow
	// ownRefill says img's rf is this client's: the write that returned
	// it set rf (full, normal, create). See ShardView.OwnRefill.
	ownRefill bool
	// slow says the last answer about the shard came slower than
	// maxRateLatency: no rate is taken from such answers (see
	// ShardView.Slow).
	slow bool
	// lat is the round trip of the last answer about the shard (ms).
	lat int64
}

// rateWindowMs is the shortest stretch of time an estimate is taken over:
// shorter ones are noise (three writes in two ms are not a partition at
// its ceiling).
const rateWindowMs = 400

// firstWindowMs is the shortest stretch of time the first estimate of the
// other writers' consumption of a shard is taken over (see learnLocked).
const firstWindowMs = 100

// maxRateLatency is the slowest answer (ms) a rate estimate uses.
const maxRateLatency = 50

// estimateAge is how long an estimate is trusted after it was taken (ms).
const estimateAge = 500

type throttleWindow struct {
	start    int64 // ms
	count    int   // throttled writes
	attempts int   // all writes (throttled or not)
	n        int64 // the shard count the writes were made at
}

type stormWindow struct {
	start   int64
	buckets [stormBuckets]bucketID
	count   int
}

// stormBuckets distinct buckets throttled within stormWindowMs make a
// storm: a hot partition throttles one bucket's shards, a storm (a
// table-wide fault, a noisy neighbour) all of them.
const (
	stormBuckets  = 3
	stormWindowMs = 1000
)

// ShardView is a copy of what the memory holds of one shard.
type ShardView struct {
	Img    *Image
	At     int64
	Rate   float64 // all writers, write units per ms
	Others float64 // other writers only
	// RateAt is when the rates were estimated (0: never). Provisional
	// says they come from a window shorter than a whole one: they serve
	// headroom and the full write's choice, never a partition's heat.
	RateAt      int64
	Provisional bool
	// Drain is, per limit, what the other writers consume (millitokens per
	// ms); Pending what this process's writes in flight charge
	// (millitokens). Both nil when none. Drain is the memory's own map,
	// shared by every view of the estimate: read it, never change it.
	Drain   map[string]float64
	Pending map[string]int64
	// Promise is when the last refusal on the shard said the request
	// would fit (0: none). Binding says that refusal came from a throttle
	// on a shard whose limits admit few writes (Plan.fewWrites): until
	// Promise, acquires are refused locally whatever the item shows.
	Promise int64
	Binding bool
	// OwnRefill says the item's rf was set by this client's own write,
	// which returned the item: a full item of its own refill says the
	// bucket is full by now unless others wrote since, which the rates say.
	// An item another writer refilled says nothing of that until the
	// client has measured the others (see Plan.blind).
	OwnRefill bool
	// Slow says the last answer about the shard came too slowly for a
	// rate to be taken from it (more than maxRateLatency ms): a client
	// that has not measured the shard will not soon (see
	// Plan.unmeasuredBurn).
	Slow bool
	// FullMiss is the decayed share of this process's full writes made
	// first on buckets of the plan that failed (see Memory.noteFull; set
	// by the charge, which knows the plan).
	FullMiss float64
	// Lat is the round trip of the last answer about the shard (ms): how
	// old the news in an image is by the time a write made from it lands
	// (see Plan.headroom).
	Lat int64
}

func (m *Memory) get(id bucketID) *bucketInfo {
	b, _ := m.buckets.Get(id)
	return b
}

func (m *Memory) getOrAdd(id bucketID) (b *bucketInfo, fresh bool) {
	b, ok := m.buckets.Get(id)
	if !ok {
		b = &bucketInfo{n: 1}
		m.buckets.Add(id, b)
	}
	return b, !ok
}

// shard returns the entry of a shard (nil: none yet).
func (b *bucketInfo) shard(i int) *shardInfo {
	if i == 0 {
		return b.zero
	}
	return b.more[i]
}

// makeShard returns the entry of a shard, made if missing.
func (b *bucketInfo) makeShard(i int) *shardInfo {
	if si := b.shard(i); si != nil {
		return si
	}
	var si *shardInfo
	if i == 0 {
		si = &b.s0
		b.zero = si
	} else {
		if b.more == nil {
			b.more = make(map[int]*shardInfo)
		}
		si = &shardInfo{}
		b.more[i] = si
	}
	si.ownTc, si.pending = si.tcBuf[:0:len(si.tcBuf)], si.pendingBuf[:0:len(si.pendingBuf)]
	return si
}

// Count returns the bucket's shard count as this client knows it (1 when
// unknown).
func (m *Memory) Count(ref keys.Bucket) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.get(idOf(ref)); b != nil {
		return b.n
	}
	return 1
}

// A process trusts a shard count above one only while its image of shard 0
// vouches for it: every write leaves an item's ttl at least half an hour
// after the write (see Plan.ttl), so the shard 0 an image shows is not
// deleted, and cannot be made anew at one shard beside the other shards,
// before the earlier of the ttl the image shows and half an hour after
// the image. countSkew less tolerates that much clock skew between
// processes. Past that, or with no image of shard 0, the next acquire
// writes shard 0 first (Charge.nextShard):
// its write, conditional on the count, lands or teaches the count in
// force; no process writes another shard left over from before shard 0
// was made anew.
const (
	shardZeroLife = 30 * 60 * 1000 // ms
	countSkew     = 5 * 60 * 1000  // ms
)

// trustsCount reports whether the client may choose among n shards of the
// bucket without writing shard 0 first: n is 1, or its last image of
// shard 0 still vouches that shard 0 exists (see shardZeroLife), so that
// no shard was left over beside one made anew.
func (m *Memory) trustsCount(ref keys.Bucket, n, now int64) bool {
	if n <= 1 {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.get(idOf(ref))
	return b != nil && now < b.vouched
}

// vouchedUntil returns until when (ms) img, an image of shard 0 received
// at now, lat ms after its call was made, vouches for the count it shows:
// the item is not deleted before the earlier of its ttl and half an hour
// after the call, less countSkew (see shardZeroLife).
func vouchedUntil(img *Image, now, lat int64) int64 {
	until := satAdd(now-lat, shardZeroLife)
	if ttl, ok := img.raw.Int(store.AttrTTL); ok && ttl < until/1000 {
		until = max(ttl, 0) * 1000
	}
	return until - countSkew
}

// begin is Count and pendingDoubling in one look: what an acquire starts
// from.
func (m *Memory) begin(ref keys.Bucket, now int64) (n, doubling int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.get(idOf(ref))
	if b == nil {
		return 1, 0
	}
	return b.n, b.pendingDoubling(now)
}

// View returns what the memory holds of a shard (a zero view when
// nothing).
func (m *Memory) View(ref keys.Bucket, shard int) ShardView {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.get(idOf(ref))
	if b == nil {
		return ShardView{}
	}
	si := b.shard(shard)
	if si == nil {
		return ShardView{}
	}
	return si.view()
}

// enter is carry(ref, shard, 0, true, now) and the shard's view and
// entry (made if missing) in one look: what a charge's first write to a
// shard starts from.
func (m *Memory) enter(ref keys.Bucket, shard int, now int64) (taken int64, v ShardView, si *shardInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	si = m.shardOf(ref, shard)
	taken = si.carry(0, true, now)
	return taken, si.view(), si
}

// shardOf returns the shard's entry, made if missing, with its key set.
// The caller holds m.mu.
func (m *Memory) shardOf(ref keys.Bucket, shard int) *shardInfo {
	b, _ := m.getOrAdd(idOf(ref))
	si := b.makeShard(shard)
	if si.key.PK == "" {
		si.key = ref.WithShard(shard).Key()
	}
	return si
}

func (si *shardInfo) view() ShardView {
	v := ShardView{Img: si.img, At: si.at, Rate: si.rate, Others: si.others, RateAt: si.rateAt, Provisional: si.provisional, Promise: si.promise, Binding: si.binding, OwnRefill: si.ownRefill, Slow: si.slow, Lat: si.lat}
	if si.inflight > 0 {
		// Writes of this process are in flight on the shard: its writers
		// compete with each other as other processes' would, so for the
		// acquire at hand every write counts as another writer's.
		v.Others = v.Rate
	}
	if len(si.drain) > 0 {
		v.Drain = si.drain // never changed once made
	}
	if len(si.pending) > 0 {
		v.Pending = si.pending.asMap()
	}
	return v
}

// learn records an image of a shard received at now, lat ms after the
// call that returned it was made, and the shard count it teaches (n, when
// known; 0 for none). mine is the plan of this client's write that the
// image includes (the write that returned it), or nil (a failed write's old
// image, or a write of no consumption).
func (m *Memory) learn(ref keys.Bucket, shard int, img *Image, n, now, lat int64, mine *Plan) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.learnLocked(ref, shard, img, n, now, lat, mine)
}

// learnLocked is learn for a caller that holds m.mu.
func (m *Memory) learnLocked(ref keys.Bucket, shard int, img *Image, n, now, lat int64, mine *Plan) {
	b, fresh := m.getOrAdd(idOf(ref))
	m.learnIn(b, fresh, shard, img, n, now, lat, mine)
}

// learnIn is learnLocked in the bucket's entry b (fresh: just made).
func (m *Memory) learnIn(b *bucketInfo, fresh bool, shard int, img *Image, n, now, lat int64, mine *Plan) {
	if n > b.n && !fresh {
		b.grewAt = now // a count we knew grew: a doubling just happened
		// A window that straddles the doubling says nothing of the new
		// count (the writers that have not learned it crowd the old shards
		// for a moment): the next estimates count from here.
		// What the others consumed of a shard at the old count spreads
		// over the new shards: at the new count, each shard's share of the
		// refill is smaller, and the old estimate would count a bucket
		// far below its limit as at it (every token in view raced for,
		// acquires refused while the shard is full).
		if b.zero != nil {
			b.zero.ref = nil
			b.zero.drain = spreadDrain(b.zero.drain, b.n, n)
		}
		for _, si := range b.more {
			si.ref = nil
			si.drain = spreadDrain(si.drain, b.n, n)
		}
	}
	if n > 0 && (shard == 0 || n > b.n) {
		b.n = n
	}
	if b.doubling != 0 && b.n > b.doubling {
		b.doubling = 0 // the doubling landed
	}
	if img == nil {
		return
	}
	if shard == 0 {
		b.vouched = vouchedUntil(img, now, lat)
	}
	si := b.makeShard(shard)
	si.own(mine)
	w, ok := img.writes()
	if !ok {
		si.img, si.at, si.ownRefill = img, now, false
		return
	}
	if si.img != nil {
		// An answer overtaken by a newer one (concurrent writes) shows
		// fewer writes and no later refill; an item recreated after it
		// expired shows fewer writes too, but a later refill.
		if w0, ok0 := si.img.writes(); ok0 && w < w0 && img.rf <= si.img.rf {
			return
		}
	}
	si.img, si.at, si.ownRefill = img, now, false
	si.slow, si.lat = lat > maxRateLatency, lat
	if si.slow {
		// A slow answer describes the item as it was up to lat ms ago: no
		// rate is taken from it (what mine added stays in the window).
		return
	}
	if si.ref == nil || now < si.refAt {
		si.restart(img, now)
		return
	}
	w0, _ := si.ref.writes()
	if w < w0 {
		si.restart(img, now)
		return
	}
	switch dt := now - si.refAt; {
	case dt >= rateWindowMs:
		si.estimate(img, w-w0, dt, now)
		si.provisional = false
		si.restart(img, now)
	case dt >= firstWindowMs && si.rateAt == 0:
		// The first estimate of a shard comes sooner, for what the other
		// writers consume: a client that joins a bucket at its limit would
		// otherwise count every token it sees as its own for a whole
		// window, and race the others for each. Its write rate stays
		// provisional (headroom and the full write's choice use it) until
		// a whole window: a partition's heat is judged on no less.
		si.estimate(img, w-w0, dt, now)
		si.provisional = true
		si.restart(img, now)
	case si.rateAt == 0 && dt > 0:
		// Until the first estimate, provisional write rates from the
		// window so far: on a bucket many writers start on at once, a
		// writer that waited to learn that others write would race them
		// for its full writes and burn no headroom, and every such write
		// makes the others' consumption writes fail. Too noisy to say a
		// partition is hot or what the others consume (rateAt stays 0,
		// drain empty), only that others write and about how often.
		si.writeRates(w-w0, dt)
	}
}

// spreadDrain returns the drain estimates of a shard measured at a count
// of from shards, spread over n: a new map (views share the old one).
func spreadDrain(drain map[string]float64, from, n int64) map[string]float64 {
	if len(drain) == 0 || from <= 0 || n <= from {
		return drain
	}
	out := make(map[string]float64, len(drain))
	for name, d := range drain {
		out[name] = d * float64(from) / float64(n)
	}
	return out
}

// writeRates sets the shard's write rates, of all writers and of the
// others, from a window of dt ms in which its write units grew by d.
func (si *shardInfo) writeRates(d, dt int64) {
	own := min(si.ownW, d)
	si.rate = float64(d) / float64(bucket.MilliPerToken) / float64(dt)
	si.others = float64(d-own) / float64(bucket.MilliPerToken) / float64(dt)
}

// own adds what this client's write (mine, nil for none) added to the
// shard to the current window.
func (si *shardInfo) own(mine *Plan) {
	if mine == nil {
		return
	}
	si.ownW += mine.specs[len(mine.specs)-1].amount
	for i := range mine.specs {
		if sp := &mine.specs[i]; !sp.hidden && sp.amount != 0 {
			si.ownTc.add(sp.name, sp.amount)
		}
	}
}

// estimate takes the rates of a window of dt ms in which the shard's
// write units grew by d (millitokens), img closing it.
func (si *shardInfo) estimate(img *Image, d, dt, now int64) {
	si.writeRates(d, dt)
	si.rateAt = now
	// A new map (views handed out share the last one), made only when some
	// limit has a drain: a view shows none for an empty one.
	si.drain = nil
	for _, nl := range img.comp.Limits {
		if nl.Name == keys.HiddenLimit {
			continue
		}
		if old, ok := si.ref.comp.Get(nl.Name); ok && nl.TotalConsumed >= old.TotalConsumed {
			if o := nl.TotalConsumed - old.TotalConsumed - si.ownTc.get(nl.Name); o > 0 {
				if si.drain == nil {
					si.drain = make(map[string]float64, len(img.comp.Limits))
				}
				si.drain[nl.Name] = float64(o) / float64(dt)
			}
		}
	}
}

// restart makes img the reference of the next estimate.
func (si *shardInfo) restart(img *Image, now int64) {
	si.ref, si.refAt, si.ownW = img, now, 0
	si.ownTc = si.ownTc[:0]
}

// maxCarried bounds the failed writes one write charges for, and
// carriedAge how old (ms) failed writes may be to be charged: charged much
// later, they would count in a later window of the shard's write rate
// than the one the partition billed them in.
const (
	maxCarried = 8
	carriedAge = rateWindowMs
)

// carry adds k failed writes to a shard's unbilled count, and returns up to
// maxCarried of them (taken) for the next write: carry(k, true).
func (m *Memory) carry(ref keys.Bucket, shard int, k int64, take bool, now int64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shardOf(ref, shard).carry(k, take, now)
}

func (si *shardInfo) carry(k int64, take bool, now int64) int64 {
	if now-si.unbilledAt > carriedAge {
		si.unbilled = 0
	}
	if k > 0 {
		si.unbilled += k
		si.unbilledAt = now
	}
	if !take {
		return 0
	}
	t := min(si.unbilled, maxCarried)
	si.unbilled -= t
	return t
}

// promised records when a refusal on a shard at now said the request
// would fit. With keep, a promise not due yet stands when it is earlier:
// a refusal judged later from an estimate that counts on less (a share of
// a limit shared with other processes) does not postpone the time at which
// a caller who waited an earlier refusal's wait finds the store asked.
func (m *Memory) promised(ref keys.Bucket, shard int, at, now int64, keep bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.get(idOf(ref)); keep && b != nil {
		if si := b.shard(shard); si != nil && !si.binding && si.promise > now && si.promise < at {
			return
		}
	}
	m.promisedLocked(ref, shard, at)
}

// promisedLocked sets the shard's promise to at (0 clears it: the store
// answered yes), for a caller that holds m.mu.
func (m *Memory) promisedLocked(ref keys.Bucket, shard int, at int64) {
	m.promisedIn(m.get(idOf(ref)), shard, at)
}

// promisedIn is promisedLocked in the bucket's entry b (nil: none).
func (m *Memory) promisedIn(b *bucketInfo, shard int, at int64) {
	if b == nil {
		return
	}
	if si := b.shard(shard); si != nil {
		si.promise, si.binding = at, false
	}
}

// promisedBinding records a promise that binds: until at, acquires of the
// shard are refused locally (see ShardView.Binding).
func (m *Memory) promisedBinding(ref keys.Bucket, shard int, at int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.get(idOf(ref)); b != nil {
		if si := b.shard(shard); si != nil {
			si.promise, si.binding = at, true
		}
	}
}

// reserve records a write in flight of this process that charges p's
// amounts on a shard (sign 1), or forgets it (sign -1). si is the shard's
// entry, from enter.
func (m *Memory) reserve(si *shardInfo, p *Plan, sign int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	si.reserve(p, sign)
}

func (si *shardInfo) reserve(p *Plan, sign int64) {
	si.inflight += int(sign)
	for i := range p.specs {
		if sp := &p.specs[i]; !sp.hidden && sp.amount > 0 {
			if si.pending.add(sp.name, sign*sp.amount) <= 0 {
				si.pending.remove(sp.name)
			}
		}
	}
}

// tally maps limit names to millitokens: a slice, because a shard has few
// limits, found faster by a scan than by hashing, and kept without
// allocating once its backing array is there.
type tally []namedAmount

type namedAmount struct {
	name string
	v    int64
}

// get returns name's amount (0 when absent).
func (t tally) get(name string) int64 {
	for i := range t {
		if t[i].name == name {
			return t[i].v
		}
	}
	return 0
}

// add adds d to name's amount (absent: 0) and returns the sum.
func (t *tally) add(name string, d int64) int64 {
	for i := range *t {
		if e := &(*t)[i]; e.name == name {
			e.v += d
			return e.v
		}
	}
	*t = append(*t, namedAmount{name, d})
	return d
}

// remove drops name's amount. The order of the amounts is no part of a
// tally: the last one takes the place of the one dropped.
func (t *tally) remove(name string) {
	for i := range *t {
		if (*t)[i].name == name {
			last := len(*t) - 1
			(*t)[i], (*t)[last] = (*t)[last], namedAmount{}
			*t = (*t)[:last]
			return
		}
	}
}

// asMap returns the amounts as a map (nil when there are none).
func (t tally) asMap() map[string]int64 {
	if len(t) == 0 {
		return nil
	}
	m := make(map[string]int64, len(t))
	for _, e := range t {
		m[e.name] = e.v
	}
	return m
}

// grewRecently reports whether the bucket's client learned of a doubling
// within growthCooldown of now. The caller holds m.mu.
func (b *bucketInfo) grewRecently(now int64) bool {
	return b.grewAt > 0 && now-b.grewAt < growthCooldown
}

// mayDouble reports whether this client may double the bucket from the
// shard count n now, a write to shard having found its partition hot: not
// within growthCooldown of the last doubling it learned of (the new shards
// have not had time to take load off this one), unless the shard is
// overloaded even so.
func (m *Memory) mayDouble(ref keys.Bucket, shard int, n, now int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.get(idOf(ref))
	return b == nil || !b.grewRecently(now) || b.overloaded(shard, n, now)
}

// overloaded reports whether this client's writes to the shard at count n
// in the current throttle window show its partition refusing at least two
// thirds of them (hotThrottles or more): its load is then at least three
// times what it takes, and one doubling leaves each half of it at one and a
// half times. The next doubling need not wait growthCooldown: a bucket
// that needs sixteen shards would otherwise take four seconds to reach
// them, every write over the ceiling throttled meanwhile. The caller
// holds m.mu.
func (b *bucketInfo) overloaded(shard int, n, now int64) bool {
	si := b.shard(shard)
	if si == nil {
		return false
	}
	w := &si.throttle
	return w.n == n && now-w.start <= hotWindow && w.count >= hotThrottles && 3*w.count >= 2*w.attempts
}

// pendingDoubling returns the shard count this client is trying to
// double from (0 for none).
func (b *bucketInfo) pendingDoubling(now int64) int64 {
	if b.doubling == 0 {
		return 0
	}
	if now > b.doublingUntil || b.n > b.doubling {
		b.doubling = 0
		return 0
	}
	return b.doubling
}

func (m *Memory) setPendingDoubling(ref keys.Bucket, from, now int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, _ := m.getOrAdd(idOf(ref))
	if from == 0 {
		b.doubling = 0
		return
	}
	if b.n <= from {
		b.doubling, b.doublingUntil = from, now+doublingPersistence
	}
}

// noteWrite records a write to a shard, throttled or not, and reports
// whether the shard now counts as hot (see hotThrottles) at the current
// shard count n; busy is whether this client measured the shard near its
// ceiling. Writes seen before a doubling say nothing about the doubled
// bucket.
func (m *Memory) noteWrite(ref keys.Bucket, shard int, n int64, throttled bool, busy busyness, now int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.noteWriteLocked(ref, shard, n, throttled, busy, now)
}

// noteWriteLocked is noteWrite for a caller that holds m.mu.
func (m *Memory) noteWriteLocked(ref keys.Bucket, shard int, n int64, throttled bool, busy busyness, now int64) bool {
	id := idOf(ref)
	if throttled {
		m.storm.note(id, now)
	}
	return m.noteWriteIn(m.get(id), id, shard, n, throttled, busy, now)
}

// noteWriteIn is noteWriteLocked in the bucket's entry b (nil: none yet),
// once the storm window has the write.
func (m *Memory) noteWriteIn(b *bucketInfo, id bucketID, shard int, n int64, throttled bool, busy busyness, now int64) bool {
	if b == nil {
		if !throttled {
			return false // nothing to remember yet
		}
		b, _ = m.getOrAdd(id)
	}
	si := b.shard(shard)
	if si == nil {
		if !throttled {
			return false
		}
		si = b.makeShard(shard)
	}
	w := &si.throttle
	if now-w.start > hotWindow || w.n != n {
		if !throttled {
			*w = throttleWindow{}
			return false
		}
		*w = throttleWindow{start: now, n: n}
	}
	w.attempts++
	if throttled {
		w.count++
	}
	if !throttled {
		return false
	}
	if m.storm.stormy(now) {
		// Throttles across many buckets at once are a storm (a fault, a
		// noisy neighbour), not this partition's load: doubling would not
		// help.
		return false
	}
	switch busy {
	case busyCeiling:
		return w.count >= busyThrottles
	case busyNear:
		return w.count >= hotThrottles && 2*w.count >= w.attempts
	}
	return false
}

func (s *stormWindow) note(id bucketID, now int64) {
	if now-s.start > stormWindowMs {
		*s = stormWindow{start: now}
	}
	for i := 0; i < s.count; i++ {
		if s.buckets[i] == id {
			return
		}
	}
	if s.count < stormBuckets {
		s.buckets[s.count] = id
		s.count++
	}
}

// stormy reports whether throttles hit many buckets of this client at
// once now (see stormWindow): a storm, not one partition's load.
func (m *Memory) stormy(now int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.storm.stormy(now)
}

func (s *stormWindow) stormy(now int64) bool {
	return now-s.start <= stormWindowMs && s.count >= stormBuckets
}

// ForgetBucket drops what the memory holds of one bucket.
func (m *Memory) ForgetBucket(ref keys.Bucket) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buckets.Remove(idOf(ref))
}

// Forget drops everything the memory holds.
func (m *Memory) Forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buckets.Purge()
	m.storm = stormWindow{}
	m.plans, m.anyPlan = nil, prior{}
}

// Len returns how many buckets the memory holds.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.buckets.Len()
}

// When throttles mark a shard's partition as hot. DynamoDB bills failed
// conditional writes, so a saturated partition throttles before the hidden
// wcu limit, which counts this limiter's writes, can run dry; the
// throttles are the signal then. But a throttle storm (a fault, a
// neighbour) throttles too, at any rate: the shard's write rate, as this
// client last measured it (all writers together), tells them apart.
//
//   - busyThrottles throttles within hotWindow on a shard measured at 90 %
//     of the ceiling or more: a partition at its ceiling.
//   - hotThrottles throttles within hotWindow, at least half of this
//     client's writes to the shard, on a shard measured at 85 % or more: a
//     partition near its ceiling that refuses most writes.
//
// Neither counts while throttles hit stormBuckets buckets within a second
// (a storm hits them all, a hot partition one).
const (
	busyThrottles = 3
	hotThrottles  = 5
	hotWindow     = int64(1000) // ms
)

// How busy a client measured a shard.
type busyness uint8

const (
	busyNo      busyness = iota
	busyNear             // 85 % of the ceiling or more
	busyCeiling          // 90 % or more
)

// growthCooldown is how long after learning of a doubling a client waits
// before doubling the same bucket again: the new shards need a moment to
// take load, and a partition that looked hot a moment ago still does.
const growthCooldown = int64(1000) // ms

// doublingPersistence is how long a client keeps trying a doubling that a
// throttle refused (ms).
const doublingPersistence = int64(2000)

// landedLocked is what a charge write that landed teaches, in one look at
// the bucket's entry: the write (noteWriteLocked, not throttled) when it
// was counted in flight, the image it returned (learnLocked), whether that
// image's rf is the write's own (own: ShardView.OwnRefill, unless a newer
// image overtook it), and the end of the shard's promise (promisedLocked
// with 0). The caller holds m.mu.
func (m *Memory) landedLocked(ref keys.Bucket, shard int, noted bool, count int64, busy busyness, img *Image, own bool, n, now, lat int64, mine *Plan) {
	id := idOf(ref)
	b := m.get(id)
	if noted {
		m.noteWriteIn(b, id, shard, count, false, busy, now)
	}
	fresh := b == nil
	if fresh {
		b, _ = m.getOrAdd(id)
	}
	m.learnIn(b, fresh, shard, img, n, now, lat, mine)
	if si := b.shard(shard); own && si != nil && si.img == img {
		si.ownRefill = true
	}
	m.promisedIn(b, shard, 0)
}
