package engine

import (
	"errors"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// Holds. A reservation takes k tokens of a limit into a process's pool.
// The stored bucket must not refill over them while the pool holds them,
// or a window that starts once it is full again admits its burst and the
// pools besides. So the item records, per limit, the hold hd (millitokens
// reserved and not yet returned), and the bucket's cap is bx - hd: stored
// tokens plus what pools hold never exceed the burst, and no window admits
// more than burst + rate × window.
//
// fullAt is the instant the tokens reach the cap. A reservation lowers the
// tokens and the cap by k: the distance to the cap, hence fullAt, moves
// only by the charge. A return of rest tokens and k of hold raises the
// tokens by rest and the cap by k: fullAt moves by the refill of k - rest
// (what the pool handed out). Both are ADDs, exact while the bucket is
// below its cap at the writer's now (fl > now); on a bucket full at its
// cap, they take the normal write, which materializes the refill first.
//
// Holds come in generations (hg, with hs the instant it began): every pool
// lives no longer than its generation (genLifeMs), and a return names the
// generation it was reserved under (hg = :g). A hold still there
// genSkewMs after its generation ended belongs to pools that died without
// returning (a crash, a failed return): any writer's normal write then
// reclaims it (hd = 0, hg + 1), and a late return of that generation
// writes nothing, its rest dropped as a crash's. The cap never rises but
// by a write that accounts for it. Reservations start a new generation
// when the last one ended and its holds are back (or reclaimable).
//
// An item no process reserved from has no hg and no hd, and its writes
// are exactly those without reservations (the full write requires that:
// it sets the balance to the burst).

const (
	attrGen   = "hg"
	attrGenAt = "hs"
	fieldHold = "hd"

	// GenLifeMs is the life of a hold generation: no pool reserved under
	// it lives longer than it began plus this (ms).
	GenLifeMs = 600_000
	// GenSkewMs is how long after its generation ended a hold is
	// reclaimed: more than twice the clock skew between processes.
	GenSkewMs = 5_000
	// minPoolMs is the shortest life worth reserving for: a generation
	// that ends sooner takes no more reservations.
	minPoolMs = 250
	// maxReserveWrites bounds the writes of one reservation.
	maxReserveWrites = 3
)

// genOpen reports whether the image's generation takes reservations at
// now.
func (im *Image) genOpen(now int64) bool {
	return im.holds && now+minPoolMs <= im.genAt+GenLifeMs
}

// reclaimable reports whether the image's hold generation is over by
// more than the skew margin: what it holds belongs to dead pools.
func (im *Image) reclaimable(now int64) bool {
	return im.holds && now >= im.genAt+GenLifeMs+GenSkewMs
}

// held reports whether some limit of p has a hold on the image.
func (im *Image) held(p *Plan) bool {
	for i := range p.specs {
		if im.hold(&p.specs[i]) > 0 {
			return true
		}
	}
	return false
}

// holdKind is what a normal write does to the holds.
type holdKind uint8

const (
	holdNone holdKind = iota // nothing: the cap stays bx - hd as seen
	holdSame                 // ADD to hd in the generation seen (hg = :g)
	holdNew                  // a new generation: SET hd, hg + 1, hs
)

// holdOf says what p's normal write on im does to the holds at now.
func (p *Plan) holdOf(im *Image, now int64) holdKind {
	reserves, releases := p.holding()
	switch {
	case releases:
		return holdSame
	case reserves && im.genOpen(now):
		return holdSame
	case reserves:
		return holdNew
	case im.reclaimable(now) && im.held(p):
		return holdNew
	}
	return holdNone
}

// capShift is how much a normal write of kind hk moves s's cap.
func capShift(s *spec, im *Image, hk holdKind) int64 {
	switch hk {
	case holdSame:
		return s.release - s.hold
	case holdNew:
		return im.hold(s) - s.hold
	}
	return 0
}

// holdActions adds a normal write's hold actions and conditions (u,
// conds) for kind hk.
func (p *Plan) holdActions(u store.Update, conds []store.Condition, im *Image, now int64, hk holdKind) (store.Update, []store.Condition) {
	switch hk {
	case holdSame:
		g := im.gen
		if _, releases := p.holding(); releases {
			g = p.gen
		}
		conds = append(conds, store.Name(attrGen).Equal(store.Int(g)))
		for i := range p.specs {
			if s := &p.specs[i]; s.hold != s.release {
				u = u.Add(s.hd, store.Int(s.hold-s.release))
			}
		}
	case holdNew:
		if im.holds {
			u = u.Set(attrGen, store.Int(im.gen+1))
			conds = append(conds, store.Name(attrGen).Equal(store.Int(im.gen)))
		} else {
			u = u.Set(attrGen, store.Int(1))
			conds = append(conds, store.Name(attrGen).NotExists())
		}
		u = u.Set(attrGenAt, store.Int(now))
		for i := range p.specs {
			s := &p.specs[i]
			if s.hidden {
				continue
			}
			if seen, ok := im.raw.Int(s.hd); ok && im.holds {
				u = u.Set(s.hd, store.Int(s.hold))
				conds = append(conds, store.Name(s.hd).Equal(store.Int(seen)))
			} else if s.hold > 0 {
				u = u.Set(s.hd, store.Int(s.hold))
				conds = append(conds, store.Name(s.hd).NotExists())
			} else if !ok {
				// No hold seen: the balance counts up to the whole burst,
				// so a hold taken meanwhile (a process whose clock lags
				// reserving in the generation this write ends) must fail
				// the write.
				conds = append(conds, store.Name(s.hd).NotExists())
			}
		}
	}
	return u, conds
}

// fullHeld is the full write of an item with holds: every limit full at
// its cap (bx - hd as seen) at now, the balance set to that cap less the
// charge (and the cushion h, see cushion), rf to now + h. The holds must
// be exactly as seen (hd = :seen), as the balance is computed from them;
// the write takes p's holds and releases as a normal write would (holdOf).
func (p *Plan) fullHeld(im *Image, n, now, h int64) (store.Expr, error) {
	rf := now + h
	hk := p.holdOf(im, now)
	u := store.Update{}.Set(attrRefill, store.Int(rf)).Set(store.AttrTTL, store.Int(p.ttlOn(im, nil, n, rf)))
	conds := []store.Condition{
		store.Name(attrLimitsHash).Equal(store.Int(p.hash)),
		store.Name(attrShardCount).Equal(store.Int(n)),
		store.Name(attrRefill).LessThan(store.Int(now)),
	}
	u, conds = p.holdActions(u, conds, im, now, hk)
	for i := range p.specs {
		s := &p.specs[i]
		l := s.perShard(n)
		capSeen := im.capOf(s, l)
		tk := capSeen - s.amount
		if !s.hidden {
			tk -= cushionTokens(l, h)
			conds = append(conds, store.Name(s.fh).LessThanEqual(store.Int(now)))
			if hk != holdNew { // holdNew conditions every hd already
				if seen, ok := im.raw.Int(s.hd); ok {
					conds = append(conds, store.Name(s.hd).Equal(store.Int(seen)))
				} else {
					conds = append(conds, store.Name(s.hd).NotExists())
				}
			}
		}
		l.Burst = max(0, capSeen+capShift(s, im, hk))
		fa := bucket.State{Limit: l, Tokens: tk}.FullAt(rf)
		u = u.Set(s.tk, store.Int(tk)).Set(s.fl, store.Int(fa)).Set(s.fh, store.Int(fa))
		if s.amount > 0 {
			u = u.Add(s.tc, store.Int(s.amount))
		}
	}
	k := &builder{u: u, conds: conds}
	p.emitQuotas(k, im, n, now, false) // an acquire that charges a quota, on an item pools reserved from
	p.emitCaps(k, im, n, now, false)
	return store.Build(k.u, store.And(k.conds...))
}

// emitReserve is the consumption-only write of a reservation in the
// image's open generation g: the speculative write, plus hd +k per limit
// (emitSpeculative moves fl and fh by the charge only), in generation g.
func (p *Plan) emitReserve(k *builder, n, now, g int64, burn []int64) {
	k.cond(condEq, attrGen, g)
	p.emitSpeculative(k, nil, n, now, burn, false)
}

// emitReturn gives back a pool's rest (amount -rest) and its hold
// (release) in the generation it was reserved under: ADD tk +rest, hd -k,
// fl and fh by the refill of k - rest. Exact only below the cap (fl >
// now); else the normal write.
func (p *Plan) emitReturn(k *builder, n, now int64) {
	k.cond(condEq, attrShardCount, n)
	k.cond(condEq, attrGen, p.gen)
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden || (s.amount == 0 && s.release == 0) {
			continue
		}
		d := s.release + s.amount // the distance to the cap grows by k - rest
		lo, hi := s.perShard(n).RefillTime(abs(d))
		if d < 0 {
			lo, hi = -hi, -lo
		}
		if s.amount != 0 {
			k.add(s.tk, -s.amount)
			k.add(s.tc, s.amount)
		}
		if s.release != 0 {
			k.add(s.hd, -s.release)
		}
		k.add(s.fl, lo)
		k.add(s.fh, hi)
		k.exists(s.tk)
		k.cond(condGt, s.fl, now)
	}
}

// Reserve is the machine of a reservation: one write that charges a plan
// and takes its holds (Plan.WithHold) into a pool, on one shard, from the
// client's last image of it. It never refuses: when the image says the
// bucket cannot grant the charge and the hold, or the hold generation
// takes none now, it declines (Declined), and the caller charges the
// plain way. Create it with NewReserve, then Start and Feed.
type Reserve struct {
	m        *Memory
	p        *Plan
	shard    int
	n        int64
	attempts int
	lat      int64 // the last round trip (ms)
	// billed counts the failed writes on the shard not charged yet: the
	// ones earlier writes left (Memory.carry) and this reservation's own.
	// DynamoDB bills a failed conditional write like one that lands, and
	// wcu_tc counts what the partition billed: the next write charges the
	// hidden limit for them, as the charge path does; a reservation that
	// ends without a landed write leaves them to the shard's next write.
	billed int64
	mine   *Plan // the plan the last write was built from (billed included)

	// Declined is set when Done if nothing was written for the
	// reservation's sake: charge the plain way.
	Declined bool
	// Shard, N: where the charge and the hold landed (when Done and not
	// Declined). Gen is the hold generation, Until the end of the pool's
	// life (ms, this client's clock: at most the generation's end).
	Shard int
	N     int64
	Gen   int64
	Until int64
}

// NewReserve returns the machine that charges p (with holds) on shard
// (-1: one drawn from rnd; a plan that releases a pool's hold must name
// the pool's shard).
func NewReserve(m *Memory, p *Plan, rnd Rand, shard int) *Reserve {
	n := m.Count(p.Ref)
	if shard < 0 || int64(shard) >= n {
		shard = pick(rnd, n, nil)
	}
	return &Reserve{m: m, p: p, n: n, shard: shard}
}

// Start returns the first step.
func (r *Reserve) Start(now int64) Step {
	r.billed = r.m.carry(r.p.Ref, r.shard, 0, true, now)
	return r.next(r.m.View(r.p.Ref, r.shard).Img, now)
}

// next returns the write to make on im, or declines.
func (r *Reserve) next(im *Image, now int64) Step {
	if r.attempts >= maxReserveWrites || im == nil || !im.matches(r.p, r.n) {
		return r.decline(now)
	}
	if reserves, _ := r.p.holding(); reserves && r.shard != 0 && !r.m.trustsCount(r.p.Ref, r.n, now) {
		// No image of shard 0 vouches for the count: the shard may be one
		// left over from before shard 0 expired (see Memory.trustsCount).
		// The plain charge that follows the decline writes shard 0 first.
		return r.decline(now)
	}
	if !im.genOpen(now) && im.holds && !im.reclaimable(now) && im.held(r.p) {
		return r.decline(now) // the generation is closing: its pools go back first
	}
	if _, releases := r.p.holding(); releases && (!im.genOpen(now) || im.gen != r.p.gen) {
		return r.decline(now) // the hold it would release is not this generation's
	}
	if r.p.shortfall(im, r.n, now, false) != shortNone {
		return r.decline(now)
	}
	blind := r.attempts == 0 // from the client's last image, not a failed write's
	r.attempts++
	v := r.m.View(r.p.Ref, r.shard)
	if !blind {
		v.Img, v.At = im, now
	}
	q := r.p.withBilled(r.billed)
	r.mine = q
	full := im.fullBy(r.p, r.n, now)
	if full && (!blind || v.othersSince(now) < 0.5) {
		h := int64(0)
		if !blind { // lost a race: see cushion
			h = q.cushion(im, r.n, r.lat)
		}
		ex, err := q.fullHeld(im, r.n, now, h)
		return r.write(ex, err, PathFull)
	}
	// Headroom, as any write on a shared shard near its cap: the writes
	// that follow (reservations, returns, plain acquires) then find the
	// bucket below its cap and take the lock-free writes. From the
	// client's last image, the consumption-only write goes out as the
	// speculative write does: the store says whether the bucket is below
	// its cap by now (the others' headroom keeps it there).
	burn := r.p.headroom(&v, r.n, now)
	if im.genOpen(now) && (blind && r.p.covered(im, burn) || r.p.retryable(im, r.n, now, burn)) {
		g := im.gen
		ex, err := build(func(k *builder) { q.emitReserve(k, r.n, now, g, burn) })
		return r.write(ex, err, PathSpeculative)
	}
	ex, err := q.normal(im, r.n, now, true, burn)
	return r.write(ex, err, PathNormal)
}

// covered reports whether the image's stored tokens pay for the plan and
// the burn without any refill.
func (p *Plan) covered(im *Image, burn []int64) bool {
	for i := range p.specs {
		s := &p.specs[i]
		st, _, _, ok := im.state(s)
		if !ok || st.Tokens < s.amount+burnOf(burn, i) {
			return false
		}
	}
	return true
}

func (r *Reserve) decline(now int64) Step {
	r.Declined = true
	r.settleBilled(now)
	return Step{Done: true}
}

// settleBilled leaves the failed writes no write charged to the shard's
// next write (the plain charge that follows a decline takes them).
func (r *Reserve) settleBilled(now int64) {
	if r.billed > 0 {
		r.m.carry(r.p.Ref, r.shard, r.billed, false, now)
	}
	r.billed = 0
}

func (r *Reserve) write(ex store.Expr, err error, path Path) Step {
	if err != nil {
		return Step{Err: err}
	}
	return Step{Path: path, Call: &Call{Update: &store.UpdateInput{Key: r.p.Ref.WithShard(r.shard).Key(), Expr: ex,
		Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}}}
}

// Feed takes the result of the last call and returns the next step.
func (r *Reserve) Feed(res Result, now int64) Step {
	lat := res.latency(now)
	r.lat = lat
	if res.Err == nil {
		img, err := Decode(res.Write.Attributes)
		if err != nil || img == nil || !img.holds {
			return Step{Err: errors.Join(err, errors.New("limiter: a reservation's write returned no hold generation"))}
		}
		r.m.learn(r.p.Ref, r.shard, img, 0, now, lat, r.mine) // its write units are this process's own
		r.billed = 0                                          // the write charged them
		r.Shard, r.N, r.Gen = r.shard, r.n, img.gen
		r.Until = min(now+PoolLifeMs, img.genAt+GenLifeMs)
		return Step{Done: true}
	}
	im, err := conditionImage(res.Err)
	if err != nil {
		r.settleBilled(now)
		if store.OutcomeUnknown(err) || errors.Is(err, store.ErrThrottled) {
			// It may have landed: the caller accounts for it. Or the
			// partition is at its ceiling: another write now would only
			// add to it.
			return Step{Err: err}
		}
		// Not applied (a conflict): the plain acquire knows how to go on.
		return r.decline(now)
	}
	r.billed++ // DynamoDB bills a failed conditional write like a successful one
	if im != nil {
		r.m.learn(r.p.Ref, r.shard, im, 0, now, lat, nil)
	}
	return r.next(im, now)
}
