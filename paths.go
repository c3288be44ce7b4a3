package limiter

import (
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// The write paths. docs/write-paths.md explains each expression, its cost
// and why it is correct; the comments here say what each condition guards.
//
// Every write keeps two invariants per limit:
//
//   - fl <= fullAt <= fh, where fullAt is the exact instant the bucket is
//     full again (bucket.State.FullAt). Writes ADD to fl and fh rather than SET
//     them, so concurrent writers never lose each other's increments.
//   - tokens are taken only from a bucket that is not full at the writer's
//     now (fl > now), or after materializing the refill under the rf lock.
//     Taking from a full bucket without moving rf would let a later refill
//     credit the time it sat full a second time.

// speculative is the hot path: consume from the stored balance without
// reading. Valid only while every charged bucket is below its burst, the
// item was written for the same limits and shard count, and no limit's
// balance would drop below zero.
func (p *plan) speculative(n, now int64) (store.Expr, error) {
	return p.build(pathSpeculative, func(k sink) { p.emitSpeculative(k, n, now) })
}

func (p *plan) emitSpeculative(k sink, n, now int64) {
	k.cond(condEq, attrLimitsHash, p.hash)
	k.cond(condEq, attrShardCount, n)
	for i := range p.specs {
		s := &p.specs[i]
		k.cond(condGe, s.tk, s.amount)
		if s.amount == 0 {
			continue
		}
		lo, hi := s.perShard(n).RefillTime(s.amount)
		k.add(s.tk, -s.amount)
		k.add(s.tc, s.amount)
		k.add(s.fl, lo)
		k.add(s.fh, hi)
		if !s.hidden { // wcu only detects hot partitions; it need not be exact
			k.cond(condGt, s.fl, now)
		}
	}
}

// full resets a bucket that is full at now: every limit (wcu included) to
// its burst minus the charge, rf to now (strictly later than before). Blind, like speculative, and the
// cheap path for lightly used buckets, which are nearly always full.
// h dates it h ms ahead of now (the cushion, see below; 0 for none).
func (p *plan) full(n, now, h int64) (store.Expr, error) {
	return p.build(pathFull, func(k sink) { p.emitFull(k, n, now, h) })
}

func (p *plan) emitFull(k sink, n, now, h int64) {
	rf := now + h
	k.set(attrRefill, rf)
	k.set(store.AttrTTL, p.ttl(n, now, rf))
	k.cond(condEq, attrLimitsHash, p.hash)
	k.cond(condEq, attrShardCount, n)
	k.cond(condLe, attrRefill, now) // rf never moves backwards
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

// maxCushion bounds how far ahead of now a full write dates rf (ms).
const maxCushion = 10

// cushion returns how many ms ahead of now a full write after a lost race
// dates rf: at most maxCushion, and at most what refills 1 % of each
// limit's burst, paid for in tokens (cushionTokens). 0 when some limit
// cannot pay.
//
// Why: a full write makes the bucket full again a charge's refill time
// later (1/rate), and until then every other full write fails; at a
// demand near the rate, writers queue on that window (measured: 3.3 round
// trips per acquire and 3.5 % of acquires losing ten races in a row, 128
// writers at 250/s on a 300/s bucket). Dated h ahead and lowered by h of
// refill, the bucket is not full until well after h, so the writers that
// follow charge it with the consumption-only write, which takes no lock.
// The stored state then describes a moment h ahead with h of refill
// missing: it never holds more than the true bucket, as with a client
// whose clock runs h ahead (docs/write-paths.md). Only writers that lost a
// race take it: a quiet bucket stays exact (a burst after idle admits
// exactly the burst).
func (p *plan) cushion(n int64) int64 {
	h := int64(maxCushion)
	for i := range p.specs {
		if p.specs[i].hidden {
			continue
		}
		l := p.specs[i].perShard(n)
		// h * ra / rp <= burst / 100
		if l.RefillAmount > 0 {
			h = min(h, int64(float64(l.Burst)/100*float64(l.RefillPeriod)/float64(l.RefillAmount)))
		}
	}
	if h <= 0 {
		return 0
	}
	for i := range p.specs {
		s := &p.specs[i]
		l := s.perShard(n)
		if !s.hidden && l.Burst-s.amount-cushionTokens(l, h) < 0 {
			return 0
		}
	}
	return h
}

// cushionTokens is the refill of h ms, rounded up (millitokens).
func cushionTokens(l bucket.Limit, h int64) int64 {
	if h == 0 {
		return 0
	}
	return (h*l.RefillAmount + l.RefillPeriod - 1) / l.RefillPeriod
}

// create is the Put of a bucket that does not exist. Shard 0 (the first
// shard of a bucket) starts full, minus this charge. Every other shard
// starts empty and charges nothing: a shard born from a doubling must not
// bring tokens of its own, or doubling would raise the admission bound.
func (p *plan) create(ref keys.Bucket, n, now int64) store.PutInput {
	it := make(store.Item, 16+8*len(p.specs))
	it[store.AttrPK] = store.Str(ref.PK())
	it[store.AttrSK] = store.Str(keys.SKBucket)
	it[attrEntity] = store.Str(ref.Entity)
	it[attrResource] = store.Str(ref.Resource)
	it[attrShard] = store.Int(int64(ref.Shard))
	it[attrShardCount] = store.Int(n)
	it[attrLimitsHash] = store.Int(p.hash)
	it[attrRefill] = store.Int(now)
	it[store.AttrTTL] = store.Int(p.ttl(n, now, now))
	for _, ix := range ref.IndexAttrs() {
		it[ix.Name] = store.Str(ix.Value)
	}
	for i := range p.specs {
		s := &p.specs[i]
		l := s.perShard(n)
		tk, charged := l.Burst-s.amount, s.amount
		if ref.Shard != 0 && !s.hidden {
			tk, charged = 0, 0
		}
		fa := bucket.State{Limit: l, Tokens: tk}.FullAt(now)
		it[s.tk], it[s.tc] = store.Int(tk), store.Int(charged)
		it[s.cp], it[s.bx] = store.Int(s.orig.Capacity), store.Int(s.orig.Burst)
		it[s.ra], it[s.rp] = store.Int(s.orig.RefillAmount), store.Int(s.orig.RefillPeriod)
		it[s.fl], it[s.fh] = store.Int(fa), store.Int(fa)
	}
	return store.PutInput{
		Item:                        it,
		Expr:                        store.MustBuild(store.Update{}, store.Name(store.AttrPK).NotExists()),
		ReturnOldOnConditionFailure: true,
	}
}

// normal materializes the refill since the image's rf and charges, under
// the rf lock: the write succeeds only if no other writer moved rf since
// the image was taken, so each stretch of refill is credited once. It also
// brings the item to this plan's limits and shard count: new limits appear
// full (if_not_exists, so two writers cannot both create them), removed
// ones are REMOVEd, changed ones are rewritten. With floors (acquire), no
// balance may end below zero; without (adjust), debt is allowed.
func (p *plan) normal(im *image, n, now int64, floors bool) (store.Expr, error) {
	if im.matches(p, n) {
		// The common case (same limits, same shard count): one shape per
		// set of charged limits, from the template cache.
		path := pathNormal
		if floors {
			path = pathNormalFloors
		}
		return p.build(path, func(k sink) { p.emitNormal(k, im, n, now, floors) })
	}
	rf1 := normalRefill(im, now)
	u := store.Update{}.Set(attrRefill, store.Int(rf1)).
		Set(attrLimitsHash, store.Int(p.hash)).Set(store.AttrTTL, store.Int(p.ttl(n, now, rf1)))
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
	for i := range p.specs {
		s := &p.specs[i]
		l := s.perShard(n)
		st, ok := p.normalStep(s, im, n, rf1)
		if !ok { // a limit new to this item: starts full, as a new bucket
			lo, hi := l.RefillTime(s.amount)
			u = u.SetIfNotExistsPlus(s.tk, store.Int(l.Burst), store.Int(-s.amount)).
				SetIfNotExistsPlus(s.fl, store.Int(rf1), store.Int(lo)).
				SetIfNotExistsPlus(s.fh, store.Int(rf1), store.Int(hi))
			if s.amount > 0 {
				u = u.Add(s.tc, store.Int(s.amount))
			}
			u = setConfig(u, s)
			continue
		}
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
		case floors && !s.hidden:
			conds = append(conds, store.Name(s.tk).GreaterThanEqual(store.Int(-st.delta)))
		}
	}
	for _, nl := range im.comp.Limits {
		if !p.has(nl.Name) {
			for _, a := range removedAttrs(nl.Name) {
				u = u.Remove(a)
			}
		}
	}
	return store.Build(u, store.And(conds...))
}

// emitNormal is the normal write of the common case: the item has this
// plan's limits and shard count, so nothing is added, removed, rewritten
// or rescaled.
func (p *plan) emitNormal(k sink, im *image, n, now int64, floors bool) {
	rf1 := normalRefill(im, now)
	k.set(attrRefill, rf1)
	k.set(attrLimitsHash, p.hash)
	k.set(store.AttrTTL, p.ttl(n, now, rf1))
	k.cond(condEq, attrRefill, im.rf)
	k.cond(condEq, attrLimitsHash, im.hash)
	k.cond(condEq, attrShardCount, im.shardCount)
	for i := range p.specs {
		s := &p.specs[i]
		st, _ := p.normalStep(s, im, n, rf1) // present: the hashes match
		k.add(s.tk, st.delta)
		k.add(s.fl, st.fl)
		k.add(s.fh, st.fh)
		if s.amount != 0 {
			k.add(s.tc, s.amount)
		}
		if floors && !s.hidden {
			k.cond(condGe, s.tk, -st.delta)
		}
	}
}

// normalRefill is the rf a normal write sets. rf moves on every normal
// write, at least by 1 ms: the lock "rf = :seen" then fails for every
// other holder of the image, also when our clock is at or behind rf. The
// millisecond credited early is credited once, like any other.
func normalRefill(im *image, now int64) int64 { return max(im.rf+1, now) }

// normalDelta is what a normal write ADDs to one limit: to tk (delta), fl
// and fh, computed from the image's stored state (old tokens).
type normalDelta struct{ delta, fl, fh, old int64 }

// normalStep computes one limit's part of a normal write: refill under
// the stored (old) limit from the image's rf to rf1, then cap at the new
// burst (the old rate applied while the old limit was in force), then
// charge. ok is false for a limit the item does not have.
func (p *plan) normalStep(s *spec, im *image, n, rf1 int64) (normalDelta, bool) {
	l := s.perShard(n)
	old, fl0, fh0, ok := im.state(s)
	if !ok {
		return normalDelta{}, false
	}
	eff := min(old.Effective(im.rf, rf1), l.Burst)
	tk1 := eff - s.amount
	if s.hidden && tk1 < 0 {
		// The wcu gauge need not be exact, and a shard not judged hot
		// (shortfall) must not be refused for it: it bottoms out at 0.
		tk1 = min(0, max(old.Tokens, tk1))
	}
	fa := bucket.State{Limit: l, Tokens: tk1}.FullAt(rf1)
	return normalDelta{delta: tk1 - old.Tokens, fl: satAdd(fa, -fl0), fh: satAdd(fa, -fh0), old: old.Tokens}, true
}

func setConfig(u store.Update, s *spec) store.Update {
	return u.Set(s.cp, store.Int(s.orig.Capacity)).Set(s.bx, store.Int(s.orig.Burst)).
		Set(s.ra, store.Int(s.orig.RefillAmount)).Set(s.rp, store.Int(s.orig.RefillPeriod))
}

func removedAttrs(name string) []string {
	s := newSpec(Limit{Name: name}, 0)
	return []string{s.tk, s.cp, s.bx, s.ra, s.rp, s.tc, s.fl, s.fh}
}

func (p *plan) has(name string) bool {
	for i := range p.specs {
		if p.specs[i].limit.Name == name {
			return true
		}
	}
	return false
}

// ttl returns the bucket's expiry (Unix seconds): an hour after the moment
// it would be full again even if every limit were emptied now. A bucket
// that expires is full by then, so recreating it full loses nothing.
func (p *plan) ttl(n, now, rf int64) int64 {
	longest := int64(0)
	for i := range p.specs {
		s := &p.specs[i]
		_, hi := s.perShard(n).RefillTime(s.perShard(n).Burst)
		longest = max(longest, hi)
	}
	return (max(now, rf)+2*longest)/1000 + 3600
}
