package limiter

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Limiter enforces token-bucket limits whose state lives in a store. It is
// safe for concurrent use; create one per process (per namespace) and share
// it: its caches (shard counts, entity configuration, stored limits) save
// round trips.
type Limiter struct {
	st  store.Store
	cfg config

	mu      sync.Mutex
	rng     *rand.Rand
	buckets map[bucketID]*bucketInfo

	meta metaCache
}

type bucketID struct{ entity, resource string }

// bucketInfo is what this limiter remembers of one bucket: its shard count
// and the last item it saw of each shard (to predict the full path).
type bucketInfo struct {
	n         int64
	grewAt    int64 // ms, when n last grew in this cache
	images    map[int]*image
	throttles map[int]throttleWindow
}

type throttleWindow struct {
	start    int64 // ms
	count    int   // throttled writes
	attempts int   // all writes (throttled or not)
	n        int64 // the shard count the writes were made at
}

// New returns a limiter over st. It does no I/O: the table's schema
// version is checked on the first call that reads entity configuration.
func New(st store.Store, opts ...Option) (*Limiter, error) {
	cfg := config{namespace: "default", clock: systemClock{}, cacheTTL: 60 * time.Second, policy: FailClosed,
		auditRetention: DefaultAuditRetention}
	for _, o := range opts {
		o(&cfg)
	}
	if st == nil {
		return nil, invalid("store", "must not be nil")
	}
	if err := checkNamespace(cfg.namespace); err != nil {
		return nil, err
	}
	if cfg.clock == nil {
		return nil, invalid("WithClock", "clock must not be nil")
	}
	if err := checkLimits("WithDefaultLimits", cfg.defaults); err != nil {
		return nil, err
	}
	if cfg.cacheTTL < 0 {
		return nil, invalid("WithCacheTTL", "%v must not be negative", cfg.cacheTTL)
	}
	if cfg.auditRetention < 0 {
		return nil, invalid("WithAuditRetention", "%v must not be negative (0 keeps audit records forever)", cfg.auditRetention)
	}
	if cfg.policy != FailClosed && cfg.policy != FailOpen {
		return nil, invalid("WithPolicy", "must be FailClosed or FailOpen")
	}
	if cfg.rand == nil {
		cfg.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	l := &Limiter{st: st, cfg: cfg, rng: cfg.rand, buckets: make(map[bucketID]*bucketInfo)}
	l.meta.init(cfg.cacheTTL)
	return l, nil
}

func (l *Limiter) nowMs() int64 { return l.cfg.clock.Now().UnixMilli() }

// shardCount returns the cached shard count of a bucket (1 when unknown).
func (l *Limiter) shardCount(ref keys.Bucket) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[bucketID{ref.Entity, ref.Resource}]; b != nil {
		return b.n
	}
	return 1
}

func (l *Limiter) cachedImage(ref keys.Bucket) *image {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[bucketID{ref.Entity, ref.Resource}]; b != nil {
		return b.images[ref.Shard]
	}
	return nil
}

// remember records the shard count learned and the item last seen.
func (l *Limiter) remember(ref keys.Bucket, img *image, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := bucketID{ref.Entity, ref.Resource}
	b := l.buckets[id]
	fresh := b == nil
	if fresh {
		if len(l.buckets) >= maxCachedBuckets {
			// Start over rather than grow without bound: a forgotten bucket
			// costs one blind write that fails, or a full path that
			// becomes speculative, never a wrong answer.
			clear(l.buckets)
		}
		b = &bucketInfo{n: 1, images: make(map[int]*image, 1)}
		l.buckets[id] = b
	}
	if n > b.n && !fresh { // a count we knew grew: a doubling just happened
		b.grewAt = l.nowMs()
	}
	if ref.Shard == 0 || n > b.n {
		b.n = n
	}
	if img != nil {
		img.at = l.nowMs()
		if prev := b.images[ref.Shard]; prev != nil && prev != img {
			img.wpm = prev.wpm
			w0, ok0 := prev.writes()
			w1, ok1 := img.writes()
			if dt := img.at - prev.at; ok0 && ok1 && dt > 0 && w1 >= w0 {
				img.wpm = float64(w1-w0) / float64(bucket.MilliPerToken) / float64(dt)
			}
		}
		b.images[ref.Shard] = img
	}
}

// pickShard returns a uniformly random shard in [0, n) not in tried.
func (l *Limiter) pickShard(n int64, tried []int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	free := int(n) - len(tried)
	if free <= 0 {
		return -1
	}
	k := l.rng.IntN(free)
	sort.Ints(tried)
	for _, t := range tried { // the k-th shard not tried
		if t <= k {
			k++
		}
	}
	return k
}

// maxCachedBuckets bounds the per-bucket cache (shard counts, last item).
const maxCachedBuckets = 1 << 16

// maxShards bounds doubling (shared with the aggregator).
const maxShards = keys.MaxShards

// chargeBucket charges one bucket, choosing its shard: a random one; on
// exhaustion up to two others; on a hot partition, after doubling the shard
// count, one of the new shards.
func (l *Limiter) chargeBucket(ctx context.Context, tr *trace, p *plan) (shard int, n int64, img *image, err error) {
	n = l.shardCount(p.ref)
	var tried []int
	var lastRL *RateLimitedError
	for step := 0; step < 8; step++ {
		shard = l.pickShard(n, tried)
		if shard < 0 {
			break
		}
		tried = append(tried, shard)
		ref := p.ref.WithShard(shard)
		seen := l.cachedImage(ref) // this client's last view of the shard
		o := l.chargeShard(ctx, tr, p, ref, n, seen)
		throttled := o.res == failed && errors.Is(o.err, store.ErrThrottled)
		hotShard := l.noteWrite(ref, n, throttled, seen.hot())
		switch o.res {
		case charged:
			return shard, o.n, o.img, nil
		case failed:
			if !throttled {
				return 0, 0, nil, o.err
			}
			if hotShard && !l.grewRecently(p.ref) {
				// The partition keeps refusing writes: it is hot, not
				// merely unlucky once.
				if m, err := l.double(ctx, tr, p, n); err == nil && m > n {
					n, tried = m, tried[:0]
					continue
				}
			}
			if n > 1 && len(tried) < 3 {
				continue // another shard is another partition
			}
			return 0, 0, nil, o.err
		case moved:
			n = o.n
			continue
		case exhausted:
			lastRL = o.rl
			if o.n > n {
				n = o.n // learned of a doubling: the new shards may have tokens
				continue
			}
			if len(tried) >= 3 {
				return 0, 0, nil, lastRL
			}
		case hot:
			if o.n > n {
				n = o.n
				tried = tried[:0]
				continue
			}
			if l.grewRecently(p.ref) {
				// The new shards have not had time to take load off this
				// one: spread to another shard rather than double again.
				if len(tried) < 3 && int64(len(tried)) < n {
					continue
				}
				return 0, 0, nil, &store.ThrottledError{Code: store.ThrottleProvisionedThroughputExceeded,
					Reason: "limiter: bucket shards are busy", Key: p.ref.WithShard(shard).Key()}
			}
			m, err := l.double(ctx, tr, p, n)
			if err != nil {
				return 0, 0, nil, err
			}
			if m == n { // cannot shard further: the partition is simply full
				return 0, 0, nil, &store.ThrottledError{Code: store.ThrottleProvisionedThroughputExceeded,
					Reason: "limiter: bucket at its shard limit", Key: p.ref.WithShard(shard).Key()}
			}
			n, tried = m, tried[:0]
		}
	}
	if lastRL != nil {
		return 0, 0, nil, lastRL
	}
	return 0, 0, nil, &RateLimitedError{Entity: p.ref.Entity, Resource: p.ref.Resource, RetryAfter: time.Millisecond}
}

// double raises the shard count of a bucket from n to 2n with one
// conditional write on shard 0. Racing clients produce exactly one doubling
// per level: the write is conditional on the count being n. It returns the
// count now in force.
func (l *Limiter) double(ctx context.Context, tr *trace, p *plan, n int64) (int64, error) {
	if 2*n > maxShards || !p.divisible(2*n) {
		return n, nil
	}
	out, err := l.st.Update(ctx, keys.DoubleShards(p.ref, n))
	tr.add(out.Consumed, err)
	if err == nil {
		tr.ev.ShardDoublings++
		l.remember(p.ref.WithShard(0), nil, 2*n)
		l.cfg.logger.Info("limiter: doubled shard count", "entity", p.ref.Entity, "resource", p.ref.Resource, "shards", 2*n)
		return 2 * n, nil
	}
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) {
		return n, err
	}
	if m, ok := cf.Item.Int(attrShardCount); ok && m > n {
		l.remember(p.ref.WithShard(0), nil, m)
		return m, nil // someone else doubled first
	}
	return n, nil // shard 0 is missing or odd: let the next acquire create it
}

// growthCooldown is how long after learning of a doubling a client waits
// before doubling the same bucket again: the new shards need a moment to
// take load, and a partition that looked hot a moment ago still does.
const growthCooldown = int64(1000) // ms

// grewRecently reports whether this client learned of a doubling of the
// bucket within growthCooldown.
func (l *Limiter) grewRecently(ref keys.Bucket) bool {
	now := l.nowMs()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[bucketID{ref.Entity, ref.Resource}]
	return b != nil && b.grewAt != 0 && now-b.grewAt < growthCooldown
}

// When throttles mark a shard's partition as hot. DynamoDB bills failed
// conditional writes, so a saturated partition throttles before the hidden
// wcu limit, which counts this limiter's writes, can run dry; the
// throttles are the signal then. But a throttle storm (a fault, a
// neighbour) throttles too, and a partition just under its ceiling
// throttles only a little: a rate tells them apart better than a count.
//
//   - hotThrottles throttles within hotWindow, at least half of this
//     client's writes to the shard there: a partition refusing most writes.
//     A storm at 10 % for a second makes a client that writes a shard six
//     times see five refusals about once in 20,000.
//   - busyThrottles throttles within hotWindow on a shard this client
//     measured at 80 % of the ceiling or more (image.hot): a partition at
//     its ceiling that refuses only some writes.
const (
	hotThrottles  = 5
	busyThrottles = 3
	hotWindow     = int64(1000) // ms
)

// noteWrite records a write to a shard, throttled or not, and reports
// whether the shard now counts as hot (see hotThrottles) at the current
// shard count n; busy is whether this client measured the shard near its
// ceiling. Writes seen before a doubling say nothing about the doubled
// bucket.
func (l *Limiter) noteWrite(ref keys.Bucket, n int64, throttled, busy bool) bool {
	now := l.nowMs()
	l.mu.Lock()
	defer l.mu.Unlock()
	id := bucketID{ref.Entity, ref.Resource}
	b := l.buckets[id]
	if b == nil {
		if !throttled {
			return false // nothing to remember yet
		}
		b = &bucketInfo{n: 1, images: make(map[int]*image, 1)}
		l.buckets[id] = b
	}
	if b.throttles == nil {
		if !throttled {
			return false
		}
		b.throttles = make(map[int]throttleWindow)
	}
	w := b.throttles[ref.Shard]
	if now-w.start > hotWindow || w.n != n {
		if !throttled {
			delete(b.throttles, ref.Shard)
			return false
		}
		w = throttleWindow{start: now, n: n}
	}
	w.attempts++
	if throttled {
		w.count++
	}
	b.throttles[ref.Shard] = w
	return throttled && (w.count >= hotThrottles && 2*w.count >= w.attempts || busy && w.count >= busyThrottles)
}

// divisible reports whether every limit still serves its request when
// split n ways.
func (p *plan) divisible(n int64) bool {
	for i := range p.specs {
		s := &p.specs[i]
		if !s.hidden && s.perShard(n).Burst < max(s.amount, bucket.MilliPerToken) {
			return false
		}
	}
	return true
}
