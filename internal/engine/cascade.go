package engine

import (
	"errors"

	"github.com/shardlimit/limiter/store"
)

// Cascade is the machine of an acquire that charges an entity's bucket
// and its parent's, all or nothing as the caller sees it. Each side is a
// Charge; their calls go out together (one round trip when both are
// writes) and each side goes on from its own result, so a side that lost
// a race retries alone while the other stays charged. When one side is
// refused or fails after the other was charged, the charged side is
// refunded (an undo) before the answer: the caller never keeps half a
// charge. No transaction: a TransactWriteItems costs two write units per
// item and returns no item to remember.
type Cascade struct {
	Sides [2]*Charge // the entity's, then the parent's

	steps [2]Step
	done  [2]bool
	// settled is the answer given once the undo (if any) is made.
	settled *CascadeStep
	undo    *Plan
	undoIdx int
	undoN   int64 // the shard count the undo is computed at
	undos   int
}

// CascadeStep is what a Cascade asks for next: calls to make together
// (then Feed their results, in order), or an answer.
type CascadeStep struct {
	// Calls are the store calls to make now, with the side (0 child, 1
	// parent) and path of each. Two writes go out concurrently.
	Calls []*Call
	Sides []int
	Paths []Path
	// Undo marks Calls as a compensation: run it even if the caller's
	// context is cancelled, with its own deadline.
	Undo bool

	Done    bool
	Refused *Refusal
	// Parent is true when the refusal is the parent's.
	Parent bool
	Err    error
	// UndoErr, beside a refusal, says that the other side's charge could
	// not be returned and may stand.
	UndoErr error
}

// maxUndos bounds the attempts at a compensation that a throttle refused.
const maxUndos = 3

// ErrUndoFailed is wrapped by the error of a cascade whose compensation
// could not be made: one side's charge may stand (see store.OutcomeUnknown).
var ErrUndoFailed = errors.New("limiter: cascade compensation failed")

// NewCascade returns the machine charging child and parent.
func NewCascade(m *Memory, child, parent *Plan, rnd Rand, o Options) *Cascade {
	return &Cascade{Sides: [2]*Charge{NewCharge(m, child, rnd, o), NewCharge(m, parent, rnd, o)}}
}

// Start returns the first step.
func (c *Cascade) Start(now int64) CascadeStep {
	c.steps[0] = c.Sides[0].Start(now)
	c.steps[1] = c.Sides[1].Start(now)
	return c.next(now)
}

// Feed takes the results of the last step's calls, in order.
func (c *Cascade) Feed(rs []Result, now int64) CascadeStep {
	if c.undo != nil {
		return c.afterUndo(rs[0], now)
	}
	i := 0
	for side := 0; side < 2; side++ {
		if c.steps[side].Call != nil && i < len(rs) {
			c.steps[side] = c.Sides[side].Feed(rs[i], now)
			i++
		}
	}
	return c.next(now)
}

// next combines the two sides' steps.
func (c *Cascade) next(now int64) CascadeStep {
	for side := 0; side < 2; side++ {
		if c.steps[side].Done {
			c.done[side] = true
		}
	}
	for side := 0; side < 2; side++ {
		if s := c.steps[side]; s.Refused != nil || s.Err != nil {
			return c.settle(now)
		}
	}
	if c.done[0] && c.done[1] {
		return CascadeStep{Done: true}
	}
	var out CascadeStep
	for side := 0; side < 2; side++ {
		if s := c.steps[side]; s.Call != nil {
			out.Calls = append(out.Calls, s.Call)
			out.Sides = append(out.Sides, side)
			out.Paths = append(out.Paths, s.Path)
		}
	}
	return out
}

// settle answers once a side is refused or failed, after undoing the
// other side if it was charged. A refusal wins over a failure (a rate
// limit is never turned into anything a fail-open policy would admit) and
// covers both sides: when the other side's last known image refuses too,
// the longer wait wins. A side whose write failed with an unknown outcome
// may be charged: it cannot be undone (a refund of a charge that never
// applied would hand out tokens), so the answer says the outcome is
// unknown (UndoErr beside a refusal, or that error itself).
func (c *Cascade) settle(now int64) CascadeStep {
	var ans CascadeStep
	var unknown error
	for side := 0; side < 2; side++ {
		s := c.steps[side]
		switch {
		case s.Refused != nil:
			if ans.Refused == nil || retryOf(s.Refused) > retryOf(ans.Refused) {
				ans.Refused, ans.Parent = s.Refused, side == 1
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
		for side := 0; side < 2; side++ {
			if s := c.steps[side]; s.Refused == nil && s.Err == nil && !c.done[side] {
				if j := c.Sides[side].judge(now); j != nil && retryOf(j) > retryOf(ans.Refused) {
					ans.Refused, ans.Parent = j, side == 1
				}
			}
		}
		// Both sides keep the answer's promise: when its wait is over,
		// each asks the store rather than refuse from an estimate.
		if w := retryOf(ans.Refused); w < 1<<62 {
			for _, sd := range c.Sides {
				if len(sd.tried) > 0 {
					sd.m.promised(sd.p.Ref, sd.shard, now+max(w, 1), now, false) // both sides keep the cascade's wait
				}
			}
		}
	}
	charged := -1
	for side := 0; side < 2; side++ {
		switch {
		case c.done[side]:
			charged = side
		case c.steps[side].Call != nil:
			c.Sides[side].Drop(now) // its call is not made
		}
	}
	if charged < 0 {
		return ans // no side charged
	}
	// Undo the charged side: return its charge (a refund needs no guard).
	// Not the wcu charge: the write happened and was billed.
	o := c.Sides[charged]
	c.settled = &ans
	c.undo = o.p.WithAmounts(negate(o.p.Amounts())).At(o.Img)
	c.undoIdx, c.undoN = charged, o.N
	return c.undoStep(now)
}

func (c *Cascade) undoStep(now int64) CascadeStep {
	o := c.Sides[c.undoIdx]
	ex, err := c.undo.adjust(c.undoN, now)
	if err != nil {
		return c.undoFailed(err)
	}
	call := &Call{Update: &store.UpdateInput{Key: o.p.Ref.WithShard(o.Shard).Key(), Expr: ex,
		Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}}
	return CascadeStep{Calls: []*Call{call}, Sides: []int{c.undoIdx}, Paths: []Path{PathUndo}, Undo: true}
}

func (c *Cascade) afterUndo(r Result, now int64) CascadeStep {
	o := c.Sides[c.undoIdx]
	switch {
	case r.Err == nil:
		if img, err := Decode(r.Write.Attributes); err == nil && img != nil {
			o.m.learn(o.p.Ref, o.Shard, img, 0, now, r.latency(now), c.undo)
		}
		return *c.settled
	case errors.Is(r.Err, store.ErrConditionFailed):
		im, err := conditionImage(r.Err)
		if err == nil && im != nil && im.shardCount > c.undoN {
			// The bucket doubled since the charge: the refund's refill
			// times must be computed at the count the shard now has (the
			// count only grows, so this ends).
			c.undoN = im.shardCount
			return c.undoStep(now)
		}
		if err == nil && im != nil && c.undo.quotaMoved(im) {
			// A quota's window ended since the charge: its refund is moot
			// (see quota.go); the rates' still applies.
			c.undo = c.undo.withoutQuotas()
			return c.undoStep(now)
		}
		// The shard is gone (expired: it was full) or lost the limit:
		// there is nothing to return the charge to.
		return *c.settled
	case (errors.Is(r.Err, store.ErrThrottled) || errors.Is(r.Err, store.ErrTransactionConflict)) && !store.OutcomeUnknown(r.Err):
		// Certainly not applied: try again, a few times.
		c.undos++
		if c.undos < maxUndos {
			return c.undoStep(now)
		}
	}
	return c.undoFailed(r.Err)
}

// undoFailed reports a compensation that could not be made: one side's
// charge stands, or may. A refusal stays a refusal (a rate limit is never
// turned into anything a fail-open policy would admit); the stray charge
// only costs the caller tokens, and UndoErr says so. A failure becomes an
// unavailability whose outcome is unknown.
func (c *Cascade) undoFailed(err error) CascadeStep {
	who := "entity"
	if c.undoIdx == 1 {
		who = "parent"
	}
	e := &store.UnavailableError{Op: "cascade undo", OutcomeUnknown: true,
		Err: errors.Join(ErrUndoFailed, errors.New("the "+who+"'s charge may stand"), err)}
	if c.settled.Refused != nil {
		ans := *c.settled
		ans.UndoErr = errors.Join(ans.UndoErr, e)
		return ans
	}
	return CascadeStep{Err: e}
}

// judge returns a refusal when the machine's last view of its shard
// refuses the plan at now, as a local refusal would (nil otherwise): the
// other side's wait, for a cascade refusal that must cover both.
func (c *Charge) judge(now int64) *Refusal {
	v := c.view
	if v.Img == nil || !v.Img.matches(c.p, c.n) {
		return nil
	}
	if c.p.refusesLocally(&v, c.n, now, c.o) {
		return &Refusal{Plan: c.p, Img: v.Img, N: c.n, Now: now, Local: true, View: &v}
	}
	if c.p.shortfall(v.Img, c.n, now, false) == shortApp {
		return &Refusal{Plan: c.p, Img: v.Img, N: c.n, Now: now}
	}
	return nil
}

// retryOf is the longest wait of a refusal's exceeded limits (ms; -1 for
// none that a wait cures counts as longest).
func retryOf(r *Refusal) int64 {
	w := int64(0)
	for _, v := range r.Views() {
		if v.Exceeded {
			if v.RetryMs < 0 {
				return 1 << 62
			}
			w = max(w, v.RetryMs)
		}
	}
	return w
}

func negate(m map[string]int64) map[string]int64 {
	for k, v := range m {
		m[k] = -v
	}
	return m
}
