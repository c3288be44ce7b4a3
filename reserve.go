package limiter

import (
	"context"
	"errors"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// reserved runs an acquire with reservations on (see WithReservations):
// from the bucket's pool when it holds enough, else with a write that also
// takes the next reservation. done is false when the acquire must be made
// the plain way (the bucket cannot grant the reservation too, or the
// process's demand is too low to reserve).
func (l *Limiter) reserved(ctx context.Context, tr *trace, p bucketPlan) (lease *Lease, err error, done bool) {
	now := l.nowMs()
	l.returnPools(ctx, tr, l.pools.Expired(p.Ref, now, false))
	if sv, ok := l.pools.Take(p.Plan, now); ok {
		tr.ev.Path = PathPool
		return l.pooledLease(p, sv.Shard, sv.N, now), nil, true
	}
	extra := l.pools.Extra(p.Plan, l.mem.Count(p.Ref), now)
	if extra == nil {
		return nil, nil, false
	}
	used, shard, gen := l.pools.Used(p.Plan, now)
	big := p.WithHold(extra, used, gen)
	m := engine.NewReserve(l.mem, big, l.rng, shard)
	start := l.nowMs()
	step, _ := l.drive(ctx, tr, start, m.Start(start), m.Feed)
	if m.Declined || (step.Err != nil && !store.OutcomeUnknown(step.Err)) {
		// The hold was not released (an unknown outcome may have released
		// it: the bucket's cap then stays lower until the generation is
		// reclaimed, never higher).
		l.pools.Restore(p.Plan, used, gen)
	}
	if step.Err != nil && store.OutcomeUnknown(step.Err) {
		// The write may have taken the reservation; the pool never will
		// see it (like a crashed process's), and its hold is reclaimed
		// after its generation.
		tr.ev.Unsettled = addTokens(tr.ev.Unsettled, extra, 1)
	}
	switch {
	case step.Done && m.Declined:
		// The bucket, as last seen, cannot grant the charge and the
		// reservation, or takes no reservation now: the charge alone.
		return nil, nil, false
	case step.Done:
		now = l.nowMs()
		l.pools.Granted(p.Plan, now)
		tr.ev.Reserved = addTokens(nil, extra, 1)
		l.returnPools(ctx, tr, []*engine.Return{l.pools.Add(p.Plan, extra, m.Shard, m.N, m.Gen, now, m.Until)})
		return l.pooledLease(p, m.Shard, m.N, now), nil, true
	}
	return nil, step.Err, true
}

// returnPools refunds the rests of pools to the store (an adjust of
// negative amounts each), on a context detached from the caller's: the
// return is the limiter's business, and a caller that gives up meanwhile
// still gets the answer to its own acquire. A failed return is logged and
// its tokens are lost to the bucket until it refills, like a crashed
// process's.
func (l *Limiter) returnPools(ctx context.Context, tr *trace, rs []*engine.Return) {
	if len(rs) == 0 {
		return
	}
	ctx, cancel := l.detached(ctx)
	defer cancel()
	for _, r := range rs {
		if err := l.giveBack(ctx, tr, r); err != nil {
			l.cfg.logger.Warn("limiter: returning a reservation failed; its tokens come back as the bucket refills",
				"entity", r.Plan.Ref.Entity, "resource", r.Plan.Ref.Resource, "err", err)
		}
	}
}

// giveBack refunds one pool's rest (nil: nothing) and records it in the
// trace: Returned when the refund was written, Unsettled when its outcome
// is unknown, nothing when the bucket had expired (a full bucket has no
// room for a refund).
func (l *Limiter) giveBack(ctx context.Context, tr *trace, r *engine.Return) error {
	if r == nil {
		return nil
	}
	m := engine.NewAdjust(l.mem, r.Plan, r.Shard, r.N)
	now := l.nowMs()
	step, _ := l.drive(ctx, tr, now, m.Start(now), m.Feed)
	if step.Err != nil {
		if store.OutcomeUnknown(step.Err) {
			tr.ev.Unsettled = addTokens(tr.ev.Unsettled, r.Plan.Amounts(), 1)
		}
		return step.Err
	}
	if !m.Vanished {
		tr.ev.Returned = addTokens(tr.ev.Returned, r.Plan.Amounts(), -1)
	}
	return nil
}

// addTokens adds sign × milli (in whole tokens) to m, allocating it when
// nil.
func addTokens(m, milli map[string]int64, sign int64) map[string]int64 {
	if m == nil {
		m = make(map[string]int64, len(milli))
	}
	for k, v := range milli {
		m[k] += sign * v / bucket.MilliPerToken
	}
	return m
}

// Close returns every reservation's unused tokens to the store. Call it
// when the process stops; a limiter without reservations has nothing to
// return. The limiter stays usable.
func (l *Limiter) Close(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if l == nil || l.pools == nil {
		return nil
	}
	trv := l.newTrace("close", "", "")
	tr := &trv
	var errs error
	for _, r := range l.pools.Expired(keys.Bucket{}, l.nowMs(), true) {
		errs = errors.Join(errs, l.giveBack(ctx, tr, r))
	}
	l.observe(tr, errs, Succeeded)
	if errs != nil {
		return &UnavailableError{Op: "close", Err: errs}
	}
	return nil
}

// pooledLease is the lease of an acquire served from reservations on
// shard of n shards at now: refunds go to the pool, and its states are
// computed from the client's last item of the shard.
func (l *Limiter) pooledLease(p bucketPlan, shard int, n, now int64) *Lease {
	return oneLease(l, leasePart{p: p, shard: shard, n: n, pooled: true, img: l.mem.View(p.Ref, shard).Img, at: now})
}
