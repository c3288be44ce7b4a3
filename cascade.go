package limiter

import (
	"context"
	"time"

	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/store"
)

// cascade charges the entity's bucket and its parent's, all or nothing as
// the caller sees it: both first writes go out together (one round trip),
// each side goes on from its own result, and a side charged while the
// other was refused or failed is refunded before the answer (see
// engine.Cascade).
func (l *Limiter) cascade(ctx context.Context, tr *trace, child, parent bucketPlan) (*Lease, error) {
	m := engine.NewCascade(l.mem, child.Plan, parent.Plan, l.rng, l.cfg.engine)
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
		return &Lease{l: l, parts: []leasePart{child.part(m.Sides[0], now), parent.part(m.Sides[1], now)}}, nil
	case step.Refused != nil:
		tr.ev.Path = PathReject
		if step.Refused.Local {
			tr.ev.Path = PathLocal
		}
		bp := child
		if step.Parent {
			bp = parent
		}
		rl := bp.rateLimited(step.Refused)
		rl.Parent = step.Parent
		if step.UndoErr != nil {
			// Refused, but the other side's charge may stand: an outcome the
			// limiter cannot vouch for. The answer says one thing, that the
			// outcome is unknown (a caller testing ErrRateLimited first would
			// believe nothing was charged); the refusal goes in Refusal. Being
			// refused, it is never failed open (see Acquire).
			l.cfg.logger.Warn("limiter: cascade refused, and the other side's charge may stand",
				"entity", child.Ref.Entity, "resource", child.Ref.Resource, "err", step.UndoErr)
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

// calls makes the calls of a cascade step: two writes concurrently (one
// round trip), anything else one after the other.
func (l *Limiter) calls(ctx context.Context, tr *trace, step engine.CascadeStep) []engine.Result {
	if step.Undo {
		var cancel context.CancelFunc
		ctx, cancel = l.detached(ctx)
		defer cancel()
	}
	rs := make([]engine.Result, len(step.Calls))
	if len(step.Calls) == 2 && isWrite(step.Calls[0]) && isWrite(step.Calls[1]) {
		ws := make([]store.Write, 2)
		for i, c := range step.Calls {
			ws[i] = store.Write{Update: c.Update, Put: c.Put}
		}
		sent := l.nowMs()
		res := l.st.WriteConcurrently(ctx, ws)
		tr.ev.RoundTrips++
		for i, r := range res {
			tr.ev.ReadUnits += r.Output.Consumed.ReadUnits
			tr.ev.WriteUnits += r.Output.Consumed.WriteUnits
			if storeThrottled(r.Err) {
				tr.ev.Throttled++
			}
			rs[i] = engine.Result{Write: r.Output, Err: r.Err, Sent: sent}
			if step.Paths[i] == engine.PathDouble && r.Err == nil {
				l.doubled(tr, step.Calls[i].Update.Key)
			}
		}
		return rs
	}
	for i, c := range step.Calls {
		rs[i] = l.call(ctx, tr, c, l.nowMs())
		if step.Paths[i] == engine.PathDouble && rs[i].Err == nil {
			l.doubled(tr, c.Update.Key)
		}
	}
	return rs
}

func isWrite(c *engine.Call) bool { return c.Update != nil || c.Put != nil }
