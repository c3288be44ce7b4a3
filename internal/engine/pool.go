package engine

import (
	"sync"

	"github.com/shardlimit/limiter/internal/keys"
)

// Reservations. A process that acquires often from one bucket takes k
// tokens more than it needs with one of its writes (the same conditional
// write, so a reservation is exactly as safe as an acquire) and answers
// the next acquires from them in memory: a pool. It sizes k from its own
// recent demand (about PoolHorizonMs of it), never above 1/PoolShare of a
// shard's burst, and returns what it did not use when the pool's lifetime
// ends (at the next acquire of the bucket, or Close). Tokens in a pool were
// taken from the bucket before anyone got them, and the bucket records them
// as held (hold.go): it does not refill over them, so no window ever admits
// more than burst + rate × window. What a pool holds is, for the other
// processes, consumed (until it comes back), and what a crashed process
// held comes back when its hold generation is reclaimed.

// Pool sizing and lifetime.
const (
	// PoolHorizonMs is how much of its recent demand (ms of it) a process
	// reserves at a time.
	PoolHorizonMs = 100
	// PoolShare bounds a reservation: at most 1/PoolShare of a shard's
	// burst per limit, so that many processes cannot starve each other.
	PoolShare = 8
	// PoolLifeMs is how long a pool serves before its rest goes back.
	PoolLifeMs = 1000
	// demandWindowMs is the window of the demand estimate.
	demandWindowMs = 200
	// ReturnHorizonMs is how long after the last write that reserved into
	// a pool its rest may still go back (ms). The bucket item lives at
	// least an hour after any write that charged it (see Plan.ttl); later,
	// DynamoDB may have deleted it and another client made it again, full,
	// and a return would add tokens the new bucket never gave out. A rest
	// held longer is dropped, as a crashed process's is: the bucket
	// refills past it. Ten minutes are left for clock skew.
	ReturnHorizonMs = 50 * 60 * 1000
)

// Pools holds a process's reservations, one pool per bucket, and its
// demand per bucket. Safe for concurrent use; it does no I/O and reads no
// clock.
type Pools struct {
	mu    sync.Mutex
	pools map[bucketID]*pool
}

type pool struct {
	shard int
	n     int64
	hash  int64
	plan  *Plan            // for returns: the limits the pool was taken under
	left  map[string]int64 // millitokens per limit
	until int64            // ms: the end of its life (at most its generation's)
	// held is what the pool's reservations added to the bucket's hold, per
	// limit (millitokens), in hold generation gen: its return gives it
	// back (see hold.go).
	held map[string]int64
	gen  int64

	// demand, per limit: what this process was granted of the bucket in
	// the current window (millitokens, since winAt), and the last window's
	// rate (millitokens per ms). Granted, not asked: a process refused most
	// of what it asks must not reserve what it asks.
	asked map[string]int64
	winAt int64
	rate  map[string]float64
	// refusedAt is when the bucket last refused this process (ms, 0 for
	// never): a scarce bucket is not one to reserve from.
	refusedAt int64
}

// NewPools returns an empty set of pools.
func NewPools() *Pools { return &Pools{pools: make(map[bucketID]*pool)} }

func (ps *Pools) get(ref keys.Bucket) *pool {
	p := ps.pools[idOf(ref)]
	if p == nil {
		p = &pool{asked: map[string]int64{}, rate: map[string]float64{}}
		ps.pools[idOf(ref)] = p
	}
	return p
}

// note records a request's amounts in the bucket's demand estimate.
func (p *pool) note(pl *Plan, now int64) {
	if p.winAt == 0 {
		p.winAt = now
	}
	if dt := now - p.winAt; dt >= demandWindowMs {
		for name, a := range p.asked {
			p.rate[name] = float64(a) / float64(dt)
		}
		for name := range p.rate {
			if _, ok := p.asked[name]; !ok {
				p.rate[name] = 0
			}
		}
		clear(p.asked)
		p.winAt = now
	}
	for i := range pl.specs {
		if s := &pl.specs[i]; !s.hidden && s.amount > 0 {
			p.asked[s.name] += s.amount
		}
	}
}

// demand returns the process's recent demand of a limit (millitokens per
// ms): the last window's, or the current one's once it is 20 ms old if
// that is more (a process that starts busy reserves from its first
// milliseconds, not after a whole window of writes).
func (p *pool) demand(name string, now int64) float64 {
	d := p.rate[name]
	if dt := now - p.winAt; dt >= 20 {
		d = max(d, float64(p.asked[name])/float64(dt))
	}
	return d
}

// Served is an acquire answered from a pool.
type Served struct {
	Shard int
	N     int64
}

// Granted records a charge the store granted (outside the pool) in the
// bucket's demand estimate.
func (ps *Pools) Granted(pl *Plan, now int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.get(pl.Ref).note(pl, now)
}

// Refused records that the bucket refused this process: no reservation
// is taken from it for a pool's life.
func (ps *Pools) Refused(ref keys.Bucket, now int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.get(ref).refusedAt = now
}

// Take answers the plan's charge from the bucket's pool if it holds
// enough of every charged limit and is alive (same limits, not expired),
// and records it in the demand estimate. ok is false when the store must
// be asked.
func (ps *Pools) Take(pl *Plan, now int64) (s Served, ok bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.get(pl.Ref)
	if p.left == nil || p.hash != pl.hash || now >= p.until {
		return Served{}, false
	}
	for i := range pl.specs {
		if sp := &pl.specs[i]; !sp.hidden && sp.amount > p.left[sp.name] {
			return Served{}, false
		}
	}
	for i := range pl.specs {
		if sp := &pl.specs[i]; !sp.hidden && sp.amount > 0 {
			p.left[sp.name] -= sp.amount
		}
	}
	p.note(pl, now)
	return Served{Shard: p.shard, N: p.n}, true
}

// Extra returns what a write that must go to the store should reserve
// besides the plan's charge, per limit (millitokens; nil for nothing):
// the process's demand over PoolHorizonMs, less what the pool still holds,
// at most 1/PoolShare of a shard's burst. A process whose demand is below a
// request per horizon reserves nothing.
func (ps *Pools) Extra(pl *Plan, n, now int64) map[string]int64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.get(pl.Ref)
	if p.refusedAt != 0 && now-p.refusedAt < PoolLifeMs {
		return nil
	}
	var out map[string]int64
	for i := range pl.specs {
		sp := &pl.specs[i]
		if sp.hidden || sp.amount <= 0 {
			continue
		}
		want := int64(p.demand(sp.name, now) * PoolHorizonMs)
		if want < sp.amount { // less than one more request's worth coming
			return nil
		}
		want = min(want, sp.perShard(n).Burst/PoolShare)
		if p.left != nil && p.hash == pl.hash && now < p.until {
			want -= p.left[sp.name]
		}
		want = want / unit * unit // whole tokens: what callers ask for
		if want > 0 {
			if out == nil {
				out = make(map[string]int64, len(pl.specs))
			}
			out[sp.name] = want
		}
	}
	return out
}

// Used takes out of the bucket's live pool the part of its hold it has
// handed out (held less what is left, per limit; nil when none): the next
// reservation of the pool gives it back with its own write (a release,
// Plan.WithHold), so that the bucket's hold stays near what the pools
// still hold. shard and gen are the pool's, where the release must land.
// A reservation that does not land puts it back (Restore).
func (ps *Pools) Used(pl *Plan, now int64) (used map[string]int64, shard int, gen int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.pools[idOf(pl.Ref)]
	if p == nil || p.left == nil || p.hash != pl.hash || now >= p.until {
		return nil, -1, 0
	}
	for name, h := range p.held {
		if u := h - max(p.left[name], 0); u > 0 {
			if used == nil {
				used = make(map[string]int64, len(p.held))
			}
			used[name] = u
			p.held[name] -= u
		}
	}
	return used, p.shard, p.gen
}

// Restore puts back what Used took when the reservation did not land
// (the hold was not released). If the pool is gone meanwhile, the hold
// stays on the bucket until its generation is reclaimed: the cap is
// lower meanwhile, never higher.
func (ps *Pools) Restore(pl *Plan, used map[string]int64, gen int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.pools[idOf(pl.Ref)]
	if p == nil || p.left == nil || p.gen != gen {
		return
	}
	for name, u := range used {
		p.held[name] += u
	}
}

// Add puts the tokens a write reserved (and held, in hold generation gen)
// into the bucket's pool, on the shard it charged; the pool then lives
// until until (ms; see Reserve.Until). A pool on another shard, of other
// limits or of another generation, is returned (its rest in the result, to
// refund); an expired one too.
func (ps *Pools) Add(pl *Plan, extra map[string]int64, shard int, n, gen, now, until int64) (back *Return) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.get(pl.Ref)
	if p.left != nil && (p.shard != shard || p.hash != pl.hash || p.n != n || p.gen != gen || now >= p.until) {
		back = p.drain(now)
	}
	if p.left == nil {
		p.left, p.held = make(map[string]int64, len(extra)), make(map[string]int64, len(extra))
		p.shard, p.n, p.hash, p.plan, p.gen = shard, n, pl.hash, pl, gen
	}
	for name, k := range extra {
		p.left[name] += k
		p.held[name] += k
	}
	p.until = until
	return back
}

// Return is a pool's rest and hold, to give back to the shard it was
// taken from (see hold.go).
type Return struct {
	Plan  *Plan // amounts: the refunds (negative millitokens); releases: the hold
	Shard int
	N     int64
}

// drain empties the pool and returns its rest and hold, nil when there is
// none or when it is too old to go back (ReturnHorizonMs).
func (p *pool) drain(now int64) *Return {
	var r *Return
	if now-(p.until-PoolLifeMs) >= ReturnHorizonMs {
		p.left, p.held, p.plan = nil, nil, nil
		return nil
	}
	rest := map[string]int64{}
	for name, v := range p.left {
		if v > 0 {
			rest[name] = v
		}
	}
	some := len(rest) > 0
	for _, v := range p.held {
		some = some || v > 0
	}
	if some {
		r = &Return{Plan: p.plan.WithReturn(rest, p.held, p.gen), Shard: p.shard, N: p.n}
	}
	p.left, p.held, p.plan = nil, nil, nil
	return r
}

// Expired returns the rests of the pools whose life has ended by now
// (to refund), emptying them. ref limits it to one bucket (all buckets
// when ref.Entity is empty).
func (ps *Pools) Expired(ref keys.Bucket, now int64, all bool) []*Return {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []*Return
	if !all {
		if p := ps.pools[idOf(ref)]; p != nil && p.left != nil && now >= p.until {
			if r := p.drain(now); r != nil {
				out = append(out, r)
			}
		}
		return out
	}
	for _, p := range ps.pools {
		if p.left != nil {
			if r := p.drain(now); r != nil {
				out = append(out, r)
			}
		}
	}
	return out
}

// Give puts refunded tokens (a lease's rollback, a negative adjust) back
// into the bucket's pool when it is alive on that shard; it reports
// whether it did (else the store must be refunded).
func (ps *Pools) Give(pl *Plan, shard int, milli map[string]int64, now int64) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.pools[idOf(pl.Ref)]
	if p == nil || p.left == nil || p.shard != shard || p.hash != pl.hash || now >= p.until {
		return false
	}
	for _, v := range milli {
		if v > 0 {
			return false // only refunds go back to a pool
		}
	}
	for name, v := range milli {
		p.left[name] -= v
	}
	return true
}

// Held returns what the bucket's pool holds of a limit now (millitokens;
// 0 when none or expired).
func (ps *Pools) Held(ref keys.Bucket, name string, now int64) int64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.pools[idOf(ref)]
	if p == nil || p.left == nil || now >= p.until {
		return 0
	}
	return p.left[name]
}

// Debit takes a lease's further charge (an Adjust) from the bucket's pool
// when it is alive on that shard and holds enough of every limit; it
// reports whether it did (else the store must be charged).
func (ps *Pools) Debit(pl *Plan, shard int, milli map[string]int64, now int64) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.pools[idOf(pl.Ref)]
	if p == nil || p.left == nil || p.shard != shard || p.hash != pl.hash || now >= p.until {
		return false
	}
	for name, v := range milli {
		if v < 0 || v > p.left[name] {
			return false
		}
	}
	for name, v := range milli {
		p.left[name] -= v
	}
	return true
}
