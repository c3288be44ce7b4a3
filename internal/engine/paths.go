package engine

import (
	"math"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// The writes. docs/write-paths.md explains each expression, its cost and
// why it is correct; the comments here say what each condition guards.
//
// Every write keeps two invariants per limit:
//
//   - fl <= fullAt <= fh, where fullAt is the exact instant the bucket is
//     full again (bucket.State.FullAt). Writes ADD to fl and fh rather
//     than SET them, so concurrent writers never lose each other's
//     increments.
//   - tokens are taken only from a bucket that is not full at the
//     writer's now (fl > now), or after materializing the refill under the
//     rf lock. Taking from a full bucket without moving rf would let a
//     later refill credit the time it sat full a second time.
//
// A write on a busy bucket near its ceiling also burns headroom (burn, in
// millitokens per limit, nil for none): tokens taken from the bucket but
// not counted as consumption (tc), which keep it below its burst so that
// the writers that follow take the lock-free consumption write. See
// Headroom in decide.go.

const (
	attrShardCount = keys.AttrShardCount
	attrLimitsHash = keys.AttrLimitsHash
	attrRefill     = bucket.AttrRefill
)

// speculative is the hot path: consume without reading and without
// moving rf. Valid only while every charged bucket is below its burst, the
// item was written for the same limits and shard count, and every limit
// holds what it takes: its stored balance does, or the refill since rf
// pays the rest (the refill route, see refillBound).
//
// ride makes it the ride-ahead write when it burns: each limit's guard
// becomes fl > now - K, K the floor of its burn's refill time (ms), so
// that it also lands on a bucket full for less than K (see rideAhead);
// the item must then have no hold generation.
//
// im is the writer's image of the item (nil: none), from which the quotas'
// part guesses the window (see quota.go).
func (p *Plan) speculative(im *Image, n, now int64, burn []int64, ride bool) (store.Expr, error) {
	return build(func(k *builder) { p.emitSpeculative(k, im, n, now, burn, ride) })
}

// emitSpeculative emits the speculative write (ride: see speculative).
func (p *Plan) emitSpeculative(k *builder, im *Image, n, now int64, burn []int64, ride bool) {
	p.emitQuotas(k, im, n, now, true)
	p.emitCaps(k, im, n, now, true)
	k.cond(condEq, attrLimitsHash, p.hash)
	k.cond(condEq, attrShardCount, n)
	if ride && burn != nil {
		// The argument for the relaxed guard is made at the burst: an item
		// whose pools hold part of it is never charged this way.
		k.notExists(attrGen)
	}
	rfMin := satAdd(now, -refillRouteAge)
	for i := range p.specs {
		s := &p.specs[i]
		l := s.perShard(n)
		take := s.amount + burnOf(burn, i)
		if !s.hidden && !s.free {
			// The wcu gauge is counted, never a condition: a write refused
			// for it at the partition's ceiling would be billed and keep
			// the partition there. Its heat is judged from the rate.
			// tk >= take OR (fh <= tmax AND rf >= rfMin AND no hold
			// generation): every limit, also one charged nothing (it must
			// not be in debt). The route counts from the burst: on an item
			// whose pools hold part of it (hold.go) the cap is lower, and
			// the stored tokens pay.
			k.either(term{condGe, s.tk, take},
				term{condLe, s.fh, refillBound(l, l.Burst, take, now)},
				term{condGe, attrRefill, rfMin},
				term{k: condAbsent, name: attrGen})
		}
		if s.amount == 0 && s.release == 0 {
			continue
		}
		// A hold lowers the cap with the tokens: the distance to the cap
		// (fullAt) moves by the rest only, and by what a release raises
		// the cap (see hold.go). A reservation releases what the pool
		// handed out of every limit it held, also one this charge takes
		// nothing of.
		lo, hi := l.RefillTime(take - s.hold + s.release)
		k.add(s.tk, -take)
		k.add(s.tc, s.amount)
		if s.hold != s.release {
			k.add(s.hd, s.hold-s.release)
		}
		k.add(s.fl, lo)
		k.add(s.fh, hi)
		if !s.hidden { // wcu only detects hot partitions; it need not be exact
			k.cond(condGt, s.fl, satAdd(now, -rideSlack(l, burnOf(burn, i), ride)))
		}
	}
}

// rideSlack is how long (ms) a bucket of limit l may have been full for a
// ride-ahead write burning b millitokens to land: the floor of b's refill
// time, so that the refill lost while it sat full is at most b (0 when
// ride is false).
func rideSlack(l bucket.Limit, b int64, ride bool) int64 {
	if !ride || b <= 0 {
		return 0
	}
	k, _ := l.RefillTime(b)
	return k
}

// The refill route. While a bucket is below its cap (fullAt > now, which
// fl > now guarantees), its balance is exactly linear in time:
//
//	tokens(now) = cap - (fullAt - now) × ra / rp    (rounded down)
//
// whatever tk stores (tk is the balance at rf; the refill since rf is the
// rest). With fullAt <= fh, the condition fh <= now + floor((cap - take) ×
// rp / ra) therefore proves tokens(now) >= take without reading rf or
// moving it: a consumption-only write may admit from the refill, and tk
// goes below zero. fh runs ahead of fullAt by up to 1 ms per charge since
// the last write that set it (each adds the ceiling of its refill time):
// the route stays sound, only more conservative, until a normal or full
// write computes fh afresh. docs/write-paths.md has the argument in full.

// refillRouteAge is how old rf may be for the refill route (ms). A write
// that moves rf sets the expiry at least an hour after rf (see ttl); a
// balance stored below zero is paid by the refill since rf, so the item
// must not expire while that refill is still owed: requiring rf within
// half an hour keeps the expiry beyond the moment the bucket is full.
const refillRouteAge = 30 * 60 * 1000

// refillBound returns the latest fh (Unix ms) at which a limit l, capped
// at cap millitokens, surely holds need millitokens at now whatever its
// stored balance, if it is below its cap; math.MinInt64 (no fh passes)
// when the cap cannot hold need or the limit does not refill.
func refillBound(l bucket.Limit, cap, need, now int64) int64 {
	room := cap - need
	if room < 0 || l.RefillAmount < 1 {
		return math.MinInt64
	}
	lo, _ := l.RefillTime(room)
	if lo >= bucket.MaxRefillTime {
		return math.MinInt64
	}
	return satAdd(now, lo)
}

func burnOf(burn []int64, i int) int64 {
	if burn == nil {
		return 0
	}
	return burn[i]
}

// full resets a bucket that is full at now: every limit (wcu included) to
// its burst minus the charge, rf to now + h. Blind, like speculative, and
// the cheap path for lightly used buckets, which are nearly always full. h
// dates it h ms ahead of now (the cushion, see below; 0 for none).
func (p *Plan) full(im *Image, n, now, h int64) (store.Expr, error) {
	return build(func(k *builder) { p.emitFull(k, im, n, now, h) })
}

// emitFull emits the full write (im: the writer's image, for the quotas).
func (p *Plan) emitFull(k *builder, im *Image, n, now, h int64) {
	p.emitQuotas(k, im, n, now, false)
	p.emitCaps(k, im, n, now, false)
	rf := now + h
	k.set(attrRefill, rf)
	k.set(store.AttrTTL, p.ttlOn(im, nil, n, rf))
	k.cond(condEq, attrLimitsHash, p.hash)
	k.cond(condEq, attrShardCount, n)
	// rf moves forward, strictly: never back, and never staying where it
	// is, or a normal write computed from an item before this one (same
	// rf) would pass its lock and ADD its delta to the balance set here.
	k.cond(condLt, attrRefill, now)
	// The full write sets the balance to the burst: only on an item no
	// process ever reserved from (the blind paths take it only on such an
	// image). Pools may hold part of a burst; hold.go says how.
	k.notExists(attrGen)
	for i := range p.specs {
		s := &p.specs[i]
		l := s.perShard(n)
		tk := l.Burst - s.amount
		if !s.hidden { // the wcu gauge need not pay: it is reset anyway
			tk -= cushionTokens(l, h)
		}
		fa := bucket.State{Limit: l, Tokens: tk}.FullAt(rf)
		k.set(s.tk, tk)
		k.set(s.fl, fa)
		k.set(s.fh, fa)
		if s.amount > 0 {
			k.add(s.tc, s.amount)
		}
		if !s.hidden {
			k.cond(condLe, s.fh, now)
		}
	}
}

// maxCushion bounds how far ahead of now a full write dates rf (ms), and
// maxLatencyCushion how far when the store's round trip is longer.
const (
	maxCushion        = 10
	maxLatencyCushion = 100
)

// cushion returns how many ms ahead of now a full write after a lost race
// dates rf, paid for in tokens (cushionTokens): maxCushion, at most what
// refills 1 % of each limit's burst; or, when the store's round trip (lat,
// ms) is longer, up to lat (at most maxLatencyCushion), at most what
// refills 5 % of each burst. 0 when some limit cannot pay: its cap on im
// (the burst less what pools hold, see hold.go; the burst when im is nil)
// is less than the charge and the cushion, and the full write would leave
// its balance below zero.
//
// Why: a full write makes the bucket full again a charge's refill time
// later (1/rate), and until then every other full write fails. Dated h
// ahead and lowered by h of refill, the bucket is not full until well
// after h, so the writers that follow charge it with the consumption-only
// write, which takes no lock. That only works if they arrive in time: the
// losers learn of the winner's write a half round trip after it and their
// next write lands a whole round trip after that, so the window must
// outlast a round trip (about 2h with h of refill paid). The stored state
// then describes a moment h ahead with h of refill missing: it never holds
// more than the true bucket, as with a client whose clock runs h ahead.
// Only writers that lost a race take it: a quiet bucket stays exact (a
// burst after idle admits exactly the burst).
func (p *Plan) cushion(im *Image, n, lat int64) int64 {
	h := p.cushionWithin(n, maxCushion, 100)
	if lat > h {
		h = max(h, p.cushionWithin(n, min(lat, maxLatencyCushion), 20))
	}
	if h <= 0 {
		return 0
	}
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden {
			continue
		}
		l := s.perShard(n)
		c := l.Burst
		if im != nil {
			c = im.capOf(s, l)
		}
		if c-s.amount-cushionTokens(l, h) < 0 {
			return 0
		}
	}
	return h
}

// cushionWithin returns h, at most what refills 1/share of each limit's
// burst.
func (p *Plan) cushionWithin(n, h, share int64) int64 {
	for i := range p.specs {
		if p.specs[i].hidden {
			continue
		}
		l := p.specs[i].perShard(n)
		if l.RefillAmount > 0 {
			h = min(h, int64(float64(l.Burst)/float64(share)*float64(l.RefillPeriod)/float64(l.RefillAmount)))
		}
	}
	return h
}

// cushionTokens is the refill of h ms, rounded up (millitokens).
func cushionTokens(l bucket.Limit, h int64) int64 {
	return (h*l.RefillAmount + l.RefillPeriod - 1) / l.RefillPeriod
}

// create is the Put of a bucket that does not exist. Shard 0 (the first
// shard of a bucket) starts full, minus this charge. Every other shard
// starts empty and charges nothing: a shard born from a doubling must not
// bring tokens of its own, or doubling would raise the admission bound.
func (p *Plan) create(shard int, n, now int64) store.PutInput {
	return p.createWith(shard, n, now, false)
}

// createWith is create; debit says the charge applies on any shard and
// only where positive (an adjust meeting an expired bucket, which was
// full: the charge may put it in debt).
func (p *Plan) createWith(shard int, n, now int64, debit bool) store.PutInput {
	ref := p.Ref.WithShard(shard)
	it := make(store.Item, 16+8*len(p.specs))
	it[store.AttrPK] = store.Str(ref.PK())
	it[store.AttrSK] = store.Str(keys.SKBucket)
	it[keys.AttrEntity] = store.Str(ref.Entity)
	it[keys.AttrResource] = store.Str(ref.Resource)
	it[keys.AttrShard] = store.Int(int64(ref.Shard))
	it[attrShardCount] = store.Int(n)
	it[attrLimitsHash] = store.Int(p.hash)
	it[attrRefill] = store.Int(now)
	for _, ix := range ref.IndexAttrs() {
		it[ix.Name] = store.Str(ix.Value)
	}
	tks := make([]int64, len(p.specs))
	for i := range p.specs {
		s := &p.specs[i]
		l := s.perShard(n)
		base := l.Burst
		if ref.Shard != 0 && !s.hidden {
			base = 0
		}
		charged := s.amount
		switch {
		case debit:
			charged = max(0, s.amount)
		case ref.Shard != 0 && !s.hidden:
			charged = 0
		}
		tk := base - charged
		tks[i] = tk
		fa := bucket.State{Limit: l, Tokens: tk}.FullAt(now)
		it[s.tk], it[s.tc] = store.Int(tk), store.Int(charged)
		it[s.cp], it[s.bx] = store.Int(s.orig.Capacity), store.Int(s.orig.Burst)
		it[s.ra], it[s.rp] = store.Int(s.orig.RefillAmount), store.Int(s.orig.RefillPeriod)
		it[s.fl], it[s.fh] = store.Int(fa), store.Int(fa)
	}
	p.quotaItem(it, ref.Shard, n, now)
	p.capItem(it, ref.Shard, n, now)
	it[store.AttrTTL] = store.Int(p.ttl(tks, n, now))
	return store.PutInput{
		Item:                        it,
		Expr:                        keys.IfAbsent(),
		ReturnOldOnConditionFailure: true,
	}
}

// orCreate returns the write emit describes (a blind first write: the
// full, ride-ahead or speculative write), made so that it also creates
// shard 0 of a bucket at one shard when the item does not exist:
// attribute_not_exists(PK) OR its usual condition, each ADD made a SET
// from the value a new bucket starts at (if_not_exists), and every other
// attribute of create's item set only where absent. On an existing item
// it is the usual write, attribute for attribute (an if_not_exists of a
// present attribute writes nothing new); on a missing one it leaves
// create's item: the bucket full at now less the charge (a burn beside
// it takes nothing from a new bucket). ok is false when the write cannot create the bucket
// (it would take more than a burst): the caller then makes the usual
// write. See Plan.createsInOne for when this may replace create.
func (p *Plan) orCreate(n, now int64, emit func(*builder)) (ex store.Expr, ok bool, err error) {
	newBuilder := func(start map[string]int64) *builder {
		b := &builder{start: start, created: make(map[string]int64, 8*len(p.specs)), added: make(map[string]int64, 8*len(p.specs))}
		b.conds = b.condsIn[:0]
		return b
	}
	// What each ADD adds, then where it must start for the new item to be
	// the Put's: full less the charge, whatever the write burns beside it
	// (a burn is refill the bucket lost at its cap, or headroom; a new
	// bucket lost none).
	probe := newBuilder(map[string]int64{})
	emit(probe)
	start := make(map[string]int64, 4*len(p.specs))
	for i := range p.specs {
		s := &p.specs[i]
		l := s.perShard(n)
		lo, hi := l.RefillTime(max(s.amount, 0))
		start[s.tk] = l.Burst - max(s.amount, 0) - probe.added[s.tk] // (tc starts at 0)
		start[s.fl] = now + lo - probe.added[s.fl]                   // a full bucket at rf = now, less the charge
		start[s.fh] = now + hi - probe.added[s.fh]
	}
	b := newBuilder(start)
	emit(b)
	u := b.u
	absent := func(name string, v store.Value) {
		if _, done := b.created[name]; !done {
			u = u.SetIfNotExists(name, v)
		}
	}
	for i := range p.specs {
		s := &p.specs[i]
		if tk, done := b.created[s.tk]; done && tk < 0 && !s.hidden {
			return store.Expr{}, false, nil
		}
		l := s.perShard(n)
		absent(s.tk, store.Int(l.Burst))
		absent(s.tc, store.Int(0))
		absent(s.fl, store.Int(now))
		absent(s.fh, store.Int(now))
		absent(s.cp, store.Int(s.orig.Capacity))
		absent(s.bx, store.Int(s.orig.Burst))
		absent(s.ra, store.Int(s.orig.RefillAmount))
		absent(s.rp, store.Int(s.orig.RefillPeriod))
	}
	ref := p.Ref.WithShard(0)
	absent(keys.AttrEntity, store.Str(ref.Entity))
	absent(keys.AttrResource, store.Str(ref.Resource))
	absent(keys.AttrShard, store.Int(0))
	absent(attrShardCount, store.Int(n))
	absent(attrLimitsHash, store.Int(p.hash))
	absent(attrRefill, store.Int(now))
	for _, ix := range ref.IndexAttrs() {
		absent(ix.Name, store.Str(ix.Value))
	}
	absent(store.AttrTTL, store.Int(p.ttl(nil, n, now)))
	ex, err = store.Build(u, store.Or(store.Name(store.AttrPK).NotExists(), store.And(b.conds...)))
	return ex, err == nil, err
}

// createsInOne reports whether a process's first write to shard 0 of a
// bucket of this plan that it believes at one shard may create the bucket
// (orCreate) rather than fail on a missing item and create it with a Put.
// create first looks for shards of a bucket whose shard 0 expired while
// they live on (see afterDiscover); a bucket can have such shards only if
// it was doubled, and no request charging its limits doubles it when every
// rate limit refills at most fewWritesPerSecond tokens a second (see
// fewWrites). Quotas, concurrency caps and reservations keep the Put.
func (p *Plan) createsInOne() bool {
	if len(p.quotas) > 0 || len(p.caps) > 0 || p.gen != 0 {
		return false
	}
	rates := false
	for i := range p.specs {
		s := &p.specs[i]
		if s.hold != 0 || s.release != 0 {
			return false
		}
		if s.hidden {
			continue
		}
		l := s.perShard(1)
		if l.RefillPeriod <= 0 || float64(l.RefillAmount)*1000/float64(l.RefillPeriod)/float64(unit) > fewWritesPerSecond {
			return false
		}
		rates = true
	}
	return rates
}

// normal materializes the refill since the image's rf and charges, under
// the rf lock: the write succeeds only if no other writer moved rf since
// the image was taken, so each stretch of refill is credited once. It also
// brings the item to this plan's limits and shard count: new limits appear
// full (if_not_exists, so two writers cannot both create them), removed
// ones are REMOVEd, changed ones are rewritten. With floors (acquire), no
// balance may end below zero; without (adjust), debt is allowed.
func (p *Plan) normal(im *Image, n, now int64, floors bool, burn []int64) (store.Expr, error) {
	reserves, releases := p.holding()
	if _, hasTTL := im.raw.Int(store.AttrTTL); hasTTL && im.matches(p, n) && !im.holds && !reserves && !releases {
		// The common case (same limits, same shard count).
		return build(func(k *builder) { p.emitNormal(k, im, n, now, floors, burn) })
	}
	rf1 := normalRefill(im, now)
	tks := make([]int64, len(p.specs))
	u := store.Update{}.Set(attrRefill, store.Int(rf1)).Set(attrLimitsHash, store.Int(p.hash))
	conds := []store.Condition{
		store.Name(attrRefill).Equal(store.Int(im.rf)),
		// The configuration and shard count we computed from: a doubling
		// that lands meanwhile must not be undone.
		store.Name(attrLimitsHash).Equal(store.Int(im.hash)),
		store.Name(attrShardCount).Equal(store.Int(im.shardCount)),
	}
	if n != im.shardCount {
		u = u.Set(attrShardCount, store.Int(n))
	}
	rescaled := n != im.shardCount || im.hash != p.hash
	hk := p.holdOf(im, now)
	u, conds = p.holdActions(u, conds, im, now, hk)
	for i := range p.specs {
		s := &p.specs[i]
		l := s.perShard(n)
		st, ok := p.normalStep(s, im, n, rf1, 0, capShift(s, im, hk))
		if !ok { // a limit new to this item: starts full, as a new bucket
			tks[i] = l.Burst - s.amount
			lo, hi := l.RefillTime(s.amount)
			u = u.SetIfNotExistsPlus(s.tk, store.Int(l.Burst), store.Int(-s.amount)).
				SetIfNotExistsPlus(s.fl, store.Int(rf1), store.Int(lo)).
				SetIfNotExistsPlus(s.fh, store.Int(rf1), store.Int(hi)).
				// Also for a limit charged nothing: an item is decoded
				// only with every limit's total consumed.
				SetIfNotExistsPlus(s.tc, store.Int(0), store.Int(max(s.amount, 0)))
			u = setConfig(u, s)
			continue
		}
		tks[i] = st.old + st.delta
		u = u.Add(s.tk, store.Int(st.delta)).Add(s.fl, store.Int(st.fl)).Add(s.fh, store.Int(st.fh))
		if s.amount != 0 {
			u = u.Add(s.tc, store.Int(s.amount))
		}
		if im.hash != p.hash {
			u = setConfig(u, s)
		}
		switch {
		case rescaled:
			// The per-shard rate changes with this write. A concurrent
			// consumption-only write (no rf move) that lands first moved
			// fl and fh by refill times at the old rate, which the ADDs
			// above would carry over unscaled: fh would no longer bound
			// the moment the bucket is full. So the tokens must be exactly
			// as seen; rescaling is rare (a doubling, a new configuration).
			conds = append(conds, store.Name(s.tk).Equal(store.Int(st.old)))
		case !s.hidden:
			if floors && !s.free {
				conds = append(conds, store.Name(s.tk).GreaterThanEqual(store.Int(-st.delta)))
			}
			conds = append(conds, store.Name(s.tk).LessThanEqual(store.Int(st.ceil)))
		}
	}
	for _, nl := range im.comp.Limits {
		if !p.hasSpec(nl.Name) {
			for _, a := range removedAttrs(nl.Name) {
				u = u.Remove(a)
			}
		}
	}
	for _, a := range p.removedQuotas(im) {
		u = u.Remove(a)
	}
	for _, a := range p.removedCaps(im) {
		u = u.Remove(a)
	}
	k := &builder{u: u, conds: conds}
	p.emitQuotas(k, im, n, now, false)
	p.emitCaps(k, im, n, now, false)
	u, conds = k.u, k.conds
	if seen, ok := im.raw.Int(store.AttrTTL); ok {
		// ADD, not SET: a concurrent Adjust may have pushed the expiry
		// for its debt (see ttl).
		u = u.Add(store.AttrTTL, store.Int(p.ttlOn(im, tks, n, rf1)-seen))
		conds = append(conds, store.Name(store.AttrTTL).Exists())
	} else {
		u = u.Set(store.AttrTTL, store.Int(p.ttlOn(im, tks, n, rf1)))
	}
	return store.Build(u, store.And(conds...))
}

// emitNormal is the normal write of the common case: the item has this
// plan's limits and shard count, so nothing is added, removed, rewritten
// or rescaled.
func (p *Plan) emitNormal(k *builder, im *Image, n, now int64, floors bool, burn []int64) {
	rf1 := normalRefill(im, now)
	tks := make([]int64, len(p.specs))
	for i := range p.specs {
		st, _ := p.normalStep(&p.specs[i], im, n, rf1, burnOf(burn, i), 0)
		tks[i] = st.old + st.delta
	}
	k.set(attrRefill, rf1) // (the limits hash is the image's: it stays)
	ttl := p.ttlOn(im, tks[:len(p.specs)], n, rf1)
	// ADD, not SET: a concurrent Adjust may have pushed the expiry for its
	// debt (see ttl). The caller checked that the image has a ttl.
	seen, _ := im.raw.Int(store.AttrTTL)
	k.add(store.AttrTTL, ttl-seen)
	k.exists(store.AttrTTL)
	k.cond(condEq, attrRefill, im.rf)
	k.cond(condEq, attrLimitsHash, im.hash)
	k.cond(condEq, attrShardCount, im.shardCount)
	p.emitQuotas(k, im, n, now, false)
	p.emitCaps(k, im, n, now, false)
	for i := range p.specs {
		s := &p.specs[i]
		st, _ := p.normalStep(s, im, n, rf1, burnOf(burn, i), 0) // present: the hashes match
		k.add(s.tk, st.delta)
		k.add(s.fl, st.fl)
		k.add(s.fh, st.fh)
		if s.amount != 0 {
			k.add(s.tc, s.amount)
		}
		if floors && !s.hidden && !s.free {
			k.cond(condGe, s.tk, -st.delta)
		}
		if !s.hidden {
			k.cond(condLe, s.tk, st.ceil)
		}
	}
}

// normalRefill is the rf a normal write sets. rf moves on every normal
// write, at least by 1 ms: the lock "rf = :seen" then fails for every
// other holder of the image, also when our clock is at or behind rf. The
// millisecond credited early is credited once, like any other.
func normalRefill(im *Image, now int64) int64 { return max(im.rf+1, now) }

// normalDelta is what a normal write ADDs to one limit: to tk (delta), fl
// and fh, computed from the image's stored state (old tokens); ceil is the
// most tk may hold when the write lands (see normalStep).
type normalDelta struct{ delta, fl, fh, old, ceil int64 }

// normalStep computes one limit's part of a normal write: refill under
// the stored (old) limit from the image's rf to rf1, then cap at the new
// burst (the old rate applied while the old limit was in force), then
// charge (and burn). ok is false for a limit the item does not have. The
// cap is the burst less the limit's hold as seen; shift is how much the
// write moves it (a hold taken or given back, see hold.go).
func (p *Plan) normalStep(s *spec, im *Image, n, rf1, burn, shift int64) (normalDelta, bool) {
	l := s.perShard(n)
	old, fl0, fh0, ok := im.state(s)
	if !ok {
		return normalDelta{}, false
	}
	capSeen := im.capOf(s, l)
	refilled := old.Effective(im.rf, rf1)
	eff := min(refilled, capSeen)
	l.Burst = max(0, capSeen+shift)
	tk1 := eff - s.amount - burn
	if s.amount < 0 {
		// A refund (an adjust's) fills the bucket up to its cap, no
		// further: stored above it, the bucket would read as full while fl,
		// set from the capped balance, says it is not.
		tk1 = min(tk1, l.Burst)
	}
	if s.hidden && tk1 < 0 {
		// The wcu gauge need not be exact, and a shard not judged hot
		// (shortfall) must not be refused for it: it bottoms out at 0.
		tk1 = min(0, max(old.Tokens, tk1))
	}
	fa := bucket.State{Limit: l, Tokens: tk1}.FullAt(rf1)
	// The write ADDs delta to whatever tk holds when it lands. Consumption
	// that lands first only lowers it (the floor guards that); a refund
	// (an adjust, a rollback, a cascade's undo) raises it without moving
	// rf, and the refill then pays up to the cap only once: the cap
	// computed here from the image would not apply to the refunded tokens,
	// and the bucket would end above its burst with this charge in the
	// excess. So tk may have risen by at most the room the refill left
	// below the burst (none when it was capped).
	room := max(0, min(old.Burst, capSeen)-refilled)
	return normalDelta{delta: tk1 - old.Tokens, fl: satAdd(fa, -fl0), fh: satAdd(fa, -fh0), old: old.Tokens,
		ceil: satAdd(old.Tokens, room)}, true
}

func setConfig(u store.Update, s *spec) store.Update {
	return u.Set(s.cp, store.Int(s.orig.Capacity)).Set(s.bx, store.Int(s.orig.Burst)).
		Set(s.ra, store.Int(s.orig.RefillAmount)).Set(s.rp, store.Int(s.orig.RefillPeriod))
}

func removedAttrs(name string) []string {
	s := newSpec(Limit{Name: name})
	return []string{s.tk, s.cp, s.bx, s.ra, s.rp, s.tc, s.fl, s.fh}
}

func (p *Plan) hasSpec(name string) bool {
	for i := range p.specs {
		if p.specs[i].name == name {
			return true
		}
	}
	return false
}

// ttl returns the expiry (Unix seconds) a write sets that leaves the
// balances tks (millitokens per spec; nil when not known) at rf: an hour
// after twice the longest time any limit needs to be full again. A
// balance of zero or more counts as empty (consumption-only writes may
// drain it to zero without touching the expiry); a debt counts whole, so
// a debt deeper than the burst is not forgiven when DynamoDB deletes the
// item: until the expiry, the item is there. Writes that deepen a debt
// without setting the expiry (an Adjust) push it by their own refill time
// (adjustTTL). A bucket that DynamoDB deletes after its expiry is full by
// then, so recreating it full loses nothing.
// A bucket with quotas expires no sooner than an hour after the end of
// their windows of rf (quotaExpiry).
func (p *Plan) ttl(tks []int64, n, rf int64) int64 {
	return max(expiryAt(rf, p.ttlSpan(tks, n)), p.quotaExpiry(rf), p.capExpiry(rf))
}

// ttlOn is ttl for a write made from the image im of its item: no sooner
// than the quotas' windows the item is in need either (heldExpiry).
func (p *Plan) ttlOn(im *Image, tks []int64, n, rf int64) int64 {
	return max(p.ttl(tks, n, rf), p.heldExpiry(im))
}

// ttlSpan is ttl's time (ms) from rf to an hour before the expiry: twice
// the longest time any limit needs to be full again.
func (p *Plan) ttlSpan(tks []int64, n int64) int64 {
	longest := int64(0)
	for i := range p.specs {
		s := &p.specs[i]
		low := int64(0)
		if tks != nil && tks[i] < 0 {
			low = tks[i]
		}
		longest = max(longest, bucket.State{Limit: s.perShard(n), Tokens: low}.FullAt(0))
	}
	return 2 * longest // longest <= MaxRefillTime: no overflow
}

// expiryAt is the expiry (Unix seconds) of a write that leaves rf, span ms
// (ttlSpan) before an hour ahead of it.
func expiryAt(rf, span int64) int64 { return satAdd(rf, span)/1000 + 3600 }

// adjustTTL is how many seconds a charge of this adjust pushes the
// expiry: twice its refill time, rounded up, per the longest limit.
func (p *Plan) adjustTTL(n int64) int64 {
	longest := int64(0)
	for i := range p.specs {
		if s := &p.specs[i]; s.amount > 0 {
			_, hi := s.perShard(n).RefillTime(s.amount)
			longest = max(longest, hi)
		}
	}
	return (2*longest + 999) / 1000 // 0 when nothing is charged
}

// adjust charges (amount > 0) or refunds (amount < 0) each limit, without
// a floor: debt is allowed. A charge must not land on a bucket that is
// full at now, so it is conditional on fl > now.
//
// Quotas settle in the windows their acquire charged (see quota.go).
func (p *Plan) adjust(n, now int64) (store.Expr, error) {
	return build(func(k *builder) { p.emitAdjust(k, n, now) })
}

func (p *Plan) emitAdjust(k *builder, n, now int64) {
	if push := p.adjustTTL(n); push > 0 {
		k.add(store.AttrTTL, push) // a charge may deepen a debt: see ttl
	}
	k.cond(condEq, attrShardCount, n)
	p.emitQuotas(k, nil, n, now, false)
	p.emitCaps(k, nil, n, now, false)
	for i := range p.specs {
		s := &p.specs[i]
		if s.amount == 0 {
			continue
		}
		lo, hi := s.perShard(n).RefillTime(abs(s.amount))
		if s.amount < 0 {
			lo, hi = -hi, -lo
		}
		k.add(s.tk, -s.amount)
		k.add(s.tc, s.amount)
		k.add(s.fl, lo)
		k.add(s.fh, hi)
		k.exists(s.tk) // never resurrect a removed limit or an expired bucket
		if s.amount > 0 {
			k.cond(condGt, s.fl, now)
		}
	}
}

// adjustLoose charges the limits the image still has, without the fl
// guard: the configuration changed since the acquire (a rare, bounded
// inexactness).
func (p *Plan) adjustLoose(im *Image) (store.Expr, bool, error) {
	u := store.Update{}
	var conds []store.Condition
	for i := range p.specs {
		s := &p.specs[i]
		if _, _, _, ok := im.state(s); !ok || s.amount == 0 {
			continue
		}
		u = u.Add(s.tk, store.Int(-s.amount)).Add(s.tc, store.Int(s.amount))
		conds = append(conds, store.Name(s.tk).Exists())
	}
	for i := range p.quotas {
		// A settlement's quota, in its window (emitQuotas), if the item
		// still has it.
		if q := &p.quotas[i]; q.amount != 0 && q.at != 0 {
			if ws, _, ok := im.quota(q); ok && ws == q.at {
				u = u.Add(q.tk, store.Int(-q.amount)).Add(q.tc, store.Int(q.amount))
				conds = append(conds, store.Name(q.ws).Equal(store.Int(q.at)))
			}
		}
	}
	for i := range p.caps {
		// A release, to its slot, if the item still counts it there.
		if c := &p.caps[i]; c.amount != 0 && c.at != 0 {
			if r, ok := im.ring(c); ok && r.tag[slot(c.at)] == c.at {
				s := slot(c.at)
				u = u.Add(c.cnt[s], store.Int(c.slots())).Add(c.lv, store.Int(c.slots()))
				conds = append(conds, store.Name(c.tag[s]).Equal(store.Int(c.at)))
			}
		}
	}
	if u.Len() == 0 {
		return store.Expr{}, false, nil
	}
	ex, err := store.Build(u, store.And(conds...))
	return ex, true, err
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
