package limiter

import (
	"context"
	"time"

	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/store"
)

// cascade charges several buckets all or nothing as the caller sees it:
// the entity's and its parent's, on each resource of the request. Every
// first write goes out together (one round trip), each bucket goes on from
// its own result, and the buckets charged while another was refused or
// failed are refunded before the answer (see engine.Cascade).
func (l *Limiter) cascade(ctx context.Context, tr *trace, plans []bucketPlan) (*Lease, error) {
	ps := make([]*engine.Plan, len(plans))
	for i, bp := range plans {
		ps[i] = bp.Plan
	}
	m := engine.NewCascade(l.mem, l.rng, l.cfg.engine, ps...)
	step := m.Start(l.nowMs())
	for len(step.Calls) > 0 {
		for _, p := range step.Paths {
			tr.path(p)
		}
		step = m.Feed(l.calls(ctx, tr, step), l.nowMs())
	}
	switch {
	case step.Done:
		now := l.nowMs()
		lease := &Lease{l: l, parts: make([]leasePart, len(plans))}
		for i, bp := range plans {
			lease.parts[i] = bp.part(m.Sides[i], now)
		}
		return lease, nil
	case step.Refused != nil:
		tr.ev.Path = PathReject
		if step.Refused.Local {
			tr.ev.Path = PathLocal
		}
		rl := plans[step.Side].rateLimited(step.Refused)
		if step.UndoErr != nil {
			// Refused, but another bucket's charge may stand: an outcome
			// the limiter cannot vouch for. The answer says one thing, that
			// the outcome is unknown (a caller testing ErrRateLimited first
			// would believe nothing was charged); the refusal goes in
			// Refusal. Being refused, it is never failed open (see Acquire).
			l.cfg.logger.Warn("limiter: refused, and another bucket's charge may stand",
				"entity", plans[0].Ref.Entity, "resource", plans[0].Ref.Resource, "err", step.UndoErr)
			return nil, &UnavailableError{Op: "acquire", Err: step.UndoErr, Refusal: rl}
		}
		return nil, rl
	}
	return nil, step.Err
}

// undoTimeout bounds a cascade's compensation, which runs even when the
// caller's context is cancelled: leaving half a charge standing is worse
// than a late answer. Returning a reservation's rest is bounded likewise.
const undoTimeout = 5 * time.Second

// detached returns a context for a write that must not depend on the
// caller's: a cascade's compensation, a reservation's return. It keeps
// ctx's values, not its cancellation, and is bounded by undoTimeout on the
// system clock (a simulated clock has its own deadlines; a timer of the
// wall clock would make a simulation depend on its speed).
func (l *Limiter) detached(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = context.WithoutCancel(ctx)
	if _, real := l.cfg.clock.(systemClock); real {
		return context.WithTimeout(ctx, undoTimeout)
	}
	return ctx, func() {}
}

// calls makes the calls of a cascade step: the writes concurrently (one
// round trip), then any read, one after the other.
func (l *Limiter) calls(ctx context.Context, tr *trace, step engine.CascadeStep) []engine.Result {
	if step.Undo {
		var cancel context.CancelFunc
		ctx, cancel = l.detached(ctx)
		defer cancel()
	}
	rs := make([]engine.Result, len(step.Calls))
	var ws []store.Write
	var at []int // the index of each write in step.Calls
	for i, c := range step.Calls {
		if c.Update != nil || c.Put != nil {
			ws = append(ws, store.Write{Update: c.Update, Put: c.Put})
			at = append(at, i)
		}
	}
	if len(ws) > 1 {
		sent := l.nowMs()
		res := l.st.WriteConcurrently(ctx, ws)
		tr.ev.RoundTrips++
		for j, r := range res {
			tr.ev.ReadUnits += r.Output.Consumed.ReadUnits
			tr.ev.WriteUnits += r.Output.Consumed.WriteUnits
			if storeThrottled(r.Err) {
				tr.ev.Throttled++
			}
			rs[at[j]] = engine.Result{Write: r.Output, Err: r.Err, Sent: sent}
		}
	}
	for i, c := range step.Calls {
		if len(ws) < 2 || (c.Update == nil && c.Put == nil) {
			rs[i] = l.call(ctx, tr, c, l.nowMs())
		}
		if step.Paths[i] == engine.PathDouble && rs[i].Err == nil {
			l.doubled(tr, c.Update.Key)
		}
	}
	return rs
}
