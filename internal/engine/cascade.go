package engine

import (
	"errors"
	"fmt"

	"github.com/shardlimit/limiter/store"
)

// Cascade is the machine of an acquire that charges several buckets all
// or nothing as the caller sees it: an entity's and its parent's (a
// cascade), several resources of one entity, or both. Each side is a
// Charge; their calls go out together (one round trip of concurrent
// writes) and each side goes on from its own result, so a side that lost
// a race retries alone while the others stay charged. When one side is
// refused or fails after others were charged, the charged sides are
// refunded (undos, made together) before the answer: the caller never
// keeps part of a charge. No transaction: a TransactWriteItems costs two
// write units per item and returns no item to remember. (A side's own
// write may be one, a quota's transfer: see Charge.write. Its side then
// reads its item before the undos, which are pinned to it.)
type Cascade struct {
	Sides []*Charge // in the order of the plans given to NewCascade

	steps []Step
	sent  []int // the sides of the calls of the last step, in order
	done  []bool
	// settled is the answer given once the undos (if any) are made.
	settled *CascadeStep
	undos   []undo // the undos still to make
	failed  error  // the undos that could not be made
}

// undo is the refund of one charged side.
type undo struct {
	side  int
	plan  *Plan
	n     int64 // the shard count the refund is computed at
	tries int
}

// CascadeStep is what a Cascade asks for next: calls to make together
// (then Feed their results, in order), or an answer.
type CascadeStep struct {
	// Calls are the store calls to make now, with the side (the index of
	// its plan) and path of each. The writes go out concurrently.
	Calls []*Call
	Sides []int
	Paths []Path
	// Undo marks Calls as a compensation: run it even if the caller's
	// context is cancelled, with its own deadline.
	Undo bool

	Done    bool
	Refused *Refusal
	// Side is the side whose refusal is the answer.
	Side int
	Err  error
	// UndoErr, beside a refusal, says that another side's charge could
	// not be returned and may stand.
	UndoErr error
}

// maxUndos bounds the attempts at a compensation that a throttle refused.
const maxUndos = 3

// ErrUndoFailed is wrapped by the error of a cascade whose compensation
// could not be made: one side's charge may stand (see store.OutcomeUnknown).
var ErrUndoFailed = errors.New("limiter: cascade compensation failed")

// NewCascade returns the machine charging every plan, all or nothing.
func NewCascade(m *Memory, rnd Rand, o Options, plans ...*Plan) *Cascade {
	c := &Cascade{Sides: make([]*Charge, len(plans)), steps: make([]Step, len(plans)), done: make([]bool, len(plans))}
	for i, p := range plans {
		c.Sides[i] = NewCharge(m, p, rnd, o)
	}
	return c
}

// Start returns the first step.
func (c *Cascade) Start(now int64) CascadeStep {
	for i, sd := range c.Sides {
		c.steps[i] = sd.Start(now)
	}
	return c.next(now)
}

// Feed takes the results of the last step's calls, in order.
func (c *Cascade) Feed(rs []Result, now int64) CascadeStep {
	if c.settled != nil {
		return c.afterUndo(rs, now)
	}
	for i, side := range c.sent {
		if i < len(rs) {
			c.steps[side] = c.Sides[side].Feed(rs[i], now)
		}
	}
	return c.next(now)
}

// next combines the sides' steps.
func (c *Cascade) next(now int64) CascadeStep {
	all := true
	for side, s := range c.steps {
		c.done[side] = c.done[side] || s.Done
		all = all && c.done[side]
	}
	for _, s := range c.steps {
		if s.Refused != nil || s.Err != nil {
			// A side whose write landed in a transaction reads its item
			// first: its undo is pinned to the windows the item shows.
			if out := c.calls(func(side int) bool { return c.Sides[side].phase == phFunded }); len(out.Calls) > 0 {
				return out
			}
			return c.settle(now)
		}
	}
	if all {
		return CascadeStep{Done: true}
	}
	return c.calls(func(int) bool { return true })
}

// calls returns the step of the sides' calls that keep says to make.
func (c *Cascade) calls(keep func(side int) bool) CascadeStep {
	var out CascadeStep
	for side, s := range c.steps {
		if s.Call != nil && keep(side) {
			out.Calls = append(out.Calls, s.Call)
			out.Sides = append(out.Sides, side)
			out.Paths = append(out.Paths, s.Path)
		}
	}
	c.sent = out.Sides
	return out
}

// settle answers once a side is refused or failed, after undoing the
// sides that were charged. A refusal wins over a failure (a rate limit is
// never turned into anything a fail-open policy would admit) and covers
// every side: when another side's last known image refuses too, the
// longest wait wins (the first side's on a tie). A side whose write failed
// with an unknown outcome may be charged: it cannot be undone (a refund of
// a charge that never applied would hand out tokens), so the answer says
// the outcome is unknown (UndoErr beside a refusal, or that error itself).
func (c *Cascade) settle(now int64) CascadeStep {
	var ans CascadeStep
	var unknown error
	for side, s := range c.steps {
		switch {
		case s.Refused != nil:
			if ans.Refused == nil || retryOf(s.Refused) > retryOf(ans.Refused) {
				ans.Refused, ans.Side = s.Refused, side
			}
		case s.Err != nil:
			if store.OutcomeUnknown(s.Err) {
				unknown = s.Err
			}
			if ans.Err == nil || store.OutcomeUnknown(s.Err) {
				ans.Err = s.Err
			}
		}
	}
	if ans.Refused != nil {
		ans.Err, ans.UndoErr = nil, unknown
		for side, s := range c.steps {
			if s.Refused == nil && s.Err == nil && !c.done[side] {
				if j := c.Sides[side].judge(now); j != nil && retryOf(j) > retryOf(ans.Refused) {
					ans.Refused, ans.Side = j, side
				}
			}
		}
		// Every side keeps the answer's promise: when its wait is over,
		// each asks the store rather than refuse from an estimate.
		if at := promisedAt(ans.Refused, now); at != 0 {
			for _, sd := range c.Sides {
				if len(sd.tried) > 0 {
					sd.m.promised(sd.p.Ref, sd.shard, at, now, false) // every side keeps the cascade's wait
				}
			}
		}
	}
	for side, sd := range c.Sides {
		switch {
		case c.done[side]:
			// Undo the charged side: return its charge (a refund needs no
			// guard). Not the wcu charge: the write happened and was billed.
			// A quota's refund goes to the window the charge wrote (At).
			c.undos = append(c.undos, undo{side: side, plan: sd.p.WithAmounts(negate(sd.p.Amounts())).Settling(sd.Img, sd.At), n: sd.N})
		case c.steps[side].Call != nil:
			sd.Drop(now) // its call is not made
		}
	}
	c.settled = &ans // answered at once when no side charged
	return c.undoStep(now)
}

// undoStep asks for the undos still to make, or answers when none is left.
func (c *Cascade) undoStep(now int64) CascadeStep {
	out := CascadeStep{Undo: true}
	pending := c.undos[:0]
	for _, u := range c.undos {
		o := c.Sides[u.side]
		ex, err := u.plan.adjust(u.n, now)
		if err != nil {
			c.undoFailed(o, err)
			continue
		}
		pending = append(pending, u)
		out.Calls = append(out.Calls, &Call{Update: &store.UpdateInput{Key: o.p.Ref.WithShard(o.Shard).Key(), Expr: ex,
			Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}})
		out.Sides = append(out.Sides, u.side)
		out.Paths = append(out.Paths, PathUndo)
	}
	c.undos = pending
	if len(c.undos) > 0 {
		return out
	}
	ans := *c.settled
	if c.failed != nil {
		// One side's charge stands, or may. A refusal stays a refusal (a
		// rate limit is never turned into anything a fail-open policy
		// would admit); the stray charge only costs the caller tokens, and
		// UndoErr says so. A failure becomes an unavailability whose
		// outcome is unknown.
		e := &store.UnavailableError{Op: "cascade undo", OutcomeUnknown: true, Err: errors.Join(ErrUndoFailed, c.failed)}
		if ans.Refused == nil {
			return CascadeStep{Err: e}
		}
		ans.UndoErr = errors.Join(ans.UndoErr, e)
	}
	return ans
}

// afterUndo takes the results of the undos, in order.
func (c *Cascade) afterUndo(rs []Result, now int64) CascadeStep {
	again := c.undos[:0]
	for i, u := range c.undos {
		o := c.Sides[u.side]
		r := rs[i]
		switch {
		case r.Err == nil:
			if img, err := Decode(r.Write.Attributes); err == nil && img != nil {
				o.m.learn(o.p.Ref, o.Shard, img, 0, now, r.latency(now), u.plan)
			}
		case errors.Is(r.Err, store.ErrConditionFailed):
			im, err := conditionImage(r.Err)
			if err == nil && im != nil && im.shardCount > u.n {
				// The bucket doubled since the charge: the refund's refill
				// times must be computed at the count the shard now has
				// (the count only grows, so this ends).
				u.n = im.shardCount
				again = append(again, u)
			} else if err == nil && im != nil && u.plan.quotaMoved(im) {
				// A quota's window ended since the charge: its refund is
				// moot (see quota.go); the rates' still applies.
				u.plan = u.plan.withoutQuotas()
				again = append(again, u)
			} else if err == nil && im != nil && u.plan.capMoved(im) {
				// A cap's slot left the ring since the charge: its
				// release is moot (see concurrency.go).
				u.plan = u.plan.withoutCaps()
				again = append(again, u)
			}
			// Otherwise the shard is gone (expired: it was full) or lost
			// the limit: there is nothing to return the charge to.
		case (errors.Is(r.Err, store.ErrThrottled) || errors.Is(r.Err, store.ErrTransactionConflict)) && !store.OutcomeUnknown(r.Err):
			// Certainly not applied: try again, a few times.
			if u.tries++; u.tries < maxUndos {
				again = append(again, u)
				continue
			}
			c.undoFailed(o, r.Err)
		default:
			c.undoFailed(o, r.Err)
		}
	}
	c.undos = again
	return c.undoStep(now)
}

// undoFailed records a compensation that could not be made, naming the
// bucket whose charge stands, or may.
func (c *Cascade) undoFailed(o *Charge, err error) {
	c.failed = errors.Join(c.failed, fmt.Errorf("the charge of %q on %q may stand: %w", o.p.Ref.Entity, o.p.Ref.Resource, err))
}

// judge returns a refusal when the machine's last view of its shard
// refuses the plan at now, as a local refusal would (nil otherwise): the
// other sides' waits, for a cascade refusal that must cover every side. A
// cap's slots taken in that view refuse nothing.
func (c *Charge) judge(now int64) *Refusal {
	v := c.view
	if v.Img == nil || !v.Img.matches(c.p, c.n) {
		return nil
	}
	if c.p.refusesLocally(&v, c.n, now, c.o) {
		return c.p.localRefusal(v, c.n, now)
	}
	// Not on a cap: its slots come back by other processes' releases,
	// which no image of this process shows, so only the store refuses one
	// (see concurrency.go).
	if c.p.withoutCaps().shortfall(v.Img, c.n, now, false) == shortApp {
		return &Refusal{Plan: c.p, Img: v.Img, N: c.n, Now: now, Remembered: true}
	}
	return nil
}

// retryOf is the longest wait of a refusal's exceeded limits (ms; -1 for
// none that a wait cures counts as longest). A shadow limit's wait is left
// out, as the root package leaves it out of the RetryAfter its caller
// waits: a caller who waited that long and finds the shadow limit still
// short is admitted without it, and the memory's promise must not refuse
// that retry locally.
func retryOf(r *Refusal) int64 {
	w := int64(0)
	for _, v := range r.Views() {
		if v.Exceeded && !r.Plan.shadow(v.Name) {
			if v.RetryMs < 0 {
				return 1 << 62
			}
			w = max(w, v.RetryMs)
		}
	}
	return w
}

// promisedAt is when refusal r, answered at now, says the request fits
// (ms; 0 when no wait suffices): from then on the memory keeps the promise
// (ShardView.Promise). A refusal by shadow limits alone says it fits now:
// the root package tries again at once skipping them, and that try asks
// the store rather than be refused on a guess of what others consume.
func promisedAt(r *Refusal, now int64) int64 {
	w := retryOf(r)
	if w >= 1<<62 {
		return 0
	}
	shadow, enforcing := false, false
	for _, v := range r.Views() {
		if v.Exceeded {
			s := r.Plan.shadow(v.Name)
			shadow, enforcing = shadow || s, enforcing || !s
		}
	}
	if shadow && !enforcing {
		return now
	}
	return now + max(w, 1)
}

func negate(m map[string]int64) map[string]int64 {
	for k, v := range m {
		m[k] = -v
	}
	return m
}
