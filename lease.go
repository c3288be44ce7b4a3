package limiter

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/store"
)

// Lease is what an Acquire charged: the bucket shard(s) and the amounts. It
// lets the caller correct the charge after the fact (Adjust), return it
// (Rollback), or settle it (Commit). A lease is safe for concurrent use;
// after Commit or Rollback every method returns ErrLeaseEnded. A nil or
// zero Lease (not returned by Acquire) holds nothing: Adjust, Rollback and
// Commit return a ValidationError naming Lease.
type Lease struct {
	l *Limiter
	// parts are the buckets charged: per resource (Request.Resource's,
	// then each of Request.Also's), the entity's, then the cascade
	// parent's.
	parts []leasePart

	mu         sync.Mutex
	ended      bool
	failedOpen bool
	bypass     bool // admitted without a charge: the scope's mode is admit
}

type leasePart struct {
	p      bucketPlan
	net    map[string]int64 // millitokens adjusted beyond the acquire, per limit (nil: none)
	states []LimitState     // as the lease's last write left the bucket (computed when asked)
	// What the states are computed from: the item the lease's last write
	// returned and when (or, for a pooled part, the pool's holdings are
	// added).
	img    *engine.Image
	at     int64
	n      int64 // the shard count
	shard  int
	pooled bool // served with reservations: refunds go to the pool
	ok     bool // states computed
}

// limitStates returns the part's states, computing them the first time.
// The caller holds le.mu.
func (le *Lease) limitStates(i int) []LimitState {
	part := &le.parts[i]
	if !part.ok {
		part.ok = true
		part.states = part.p.states(part.p.Views(part.img, part.n, part.at, false, false))
		if part.pooled && le.l.pools != nil {
			for j := range part.states {
				held := le.l.pools.Held(part.p.Ref, part.states[j].Limit.Name, part.at)
				part.states[j].Reserved = held / bucket.MilliPerToken
				part.states[j].Remaining += part.states[j].Reserved
			}
		}
	}
	return append([]LimitState(nil), part.states...)
}

// FailedOpen reports whether the lease was granted without charging
// because the store failed under the fail-open policy. Adjust and Rollback
// of such a lease do nothing. It is false for a nil Lease.
func (le *Lease) FailedOpen() bool { return le != nil && le.failedOpen }

// valid returns an error for a nil or zero Lease (one not returned by
// Acquire).
func (le *Lease) valid() error {
	if le == nil || le.l == nil || (len(le.parts) == 0 && !le.failedOpen && !le.bypass) {
		return invalid("Lease", "is nil or zero: use the lease Acquire returned")
	}
	return nil
}

// Limits returns the state of the entity's limits as the lease's last
// write left them, in name order: the limit that applied, the tokens
// remaining and the time until full, from the item that write returned (no
// store call). The acquire's write sets it; each Adjust, and a Rollback,
// that writes sets it again, so after an Adjust it shows the settled
// charge, not the estimate. A correction that changes nothing (zero
// amounts, a refund to a shard that expired) leaves it as it was. With
// Request.Also it has the limits of every resource: Request.Resource's
// first, then each of Also's in its order (LimitState.Resource says
// which). It is nil for a lease granted under fail-open, and for a nil
// Lease.
func (le *Lease) Limits() []LimitState { return le.statesOf(false) }

// ParentLimits returns the state of the cascade parent's limits as the
// lease's last write to the parent's bucket left them (see Limits), of
// every resource as Limits has them; nil without a cascade.
func (le *Lease) ParentLimits() []LimitState { return le.statesOf(true) }

// statesOf returns the states of the entity's buckets, or the parent's.
func (le *Lease) statesOf(parent bool) []LimitState {
	if le == nil {
		return nil
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	var out []LimitState
	for i := range le.parts {
		if le.parts[i].p.parent == parent {
			out = append(out, le.limitStates(i)...)
		}
	}
	return out
}

// Shard returns the shard of the entity's bucket that was charged (0 for
// a nil lease or one granted under fail-open).
func (le *Lease) Shard() int {
	if le == nil || len(le.parts) == 0 {
		return 0
	}
	return le.parts[0].shard
}

// Adjust corrects the charge by delta tokens per limit, on the shard(s) the
// acquire charged: a positive delta charges more (the request used more
// than estimated; the bucket may go into debt), a negative one returns
// tokens. Every bucket the acquire charged that has the limit is adjusted:
// a cascade parent's, and each resource's with Request.Also. A shadow
// limit the acquire skipped because it would have refused (see
// Event.WouldRefuse) is left alone: as if it had refused, nothing of the
// request is charged to it.
//
// A lease never returns more than it took: a refund is capped, per limit
// and per bucket, at what the lease holds there (what the acquire charged,
// plus every further charge, less every refund so far). The rest of a
// larger refund is dropped without an error: tokens other requests
// consumed stay consumed. A refund that finds nothing to return makes no
// write. An Adjust whose outcome is unknown (an *UnavailableError with
// store.OutcomeUnknown) counts its refunds as made and its further charges
// as not made, so that a later refund cannot return them twice.
//
// Adjust is one write per bucket when the bucket is below its burst, two
// when it must first materialize a refill, the buckets' writes made
// together (one round trip); it never rejects. Errors: a *ValidationError
// for a nil ctx or a bad delta (nothing changed), ErrLeaseEnded, the
// context's error when ctx is done (as Acquire's: store.OutcomeUnknown
// tells whether the write may have applied), an *UnavailableError when
// the store failed.
func (le *Lease) Adjust(ctx context.Context, delta map[string]int64) error {
	if err := le.valid(); err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.ended {
		return ErrLeaseEnded
	}
	if le.failedOpen || le.bypass {
		return nil
	}
	for name, d := range delta {
		if d < -MaxTokens || d > MaxTokens {
			return invalid("Adjust["+name+"]", "%d must be between -%d and %d tokens", d, MaxTokens, MaxTokens)
		}
		if !slices.ContainsFunc(le.parts, func(part leasePart) bool { return part.p.Has(name) }) {
			return invalid("Adjust["+name+"]", "the lease has no limit named %q", name)
		}
		if slices.ContainsFunc(le.parts, func(part leasePart) bool { return part.p.limit(name).concurrency() }) {
			return invalid("Adjust["+name+"]", "%q is a concurrency cap: its slots are given back by Commit or Rollback, not adjusted", name)
		}
	}
	return le.applyEach(ctx, "adjust", func(part *leasePart) map[string]int64 {
		held := part.held()
		out := make(map[string]int64, len(delta))
		for name, d := range delta {
			if !part.p.Has(name) || slices.Contains(part.p.skipped, name) {
				continue // a limit the cascade parent does not have, or one the acquire skipped
			}
			if v := max(d*bucket.MilliPerToken, -held[name]); v != 0 {
				out[name] = v
			}
		}
		return out
	})
}

// Rollback returns everything the lease charged, adjustments included, and
// ends it: what it still holds after the refunds of earlier Adjust calls,
// never more. Use it when the work the tokens paid for did not happen.
//
// When the store refuses the refund in a way that proves nothing was
// applied (a throttle), Rollback returns the error and the lease stays
// usable: call Rollback again. When the outcome is unknown (a timeout, a
// server error), the lease ends: a second refund might return the tokens
// twice.
func (le *Lease) Rollback(ctx context.Context) error {
	if err := le.valid(); err != nil {
		return err
	}
	if err := checkCtx(ctx); err != nil {
		return err
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.ended {
		return ErrLeaseEnded
	}
	if le.failedOpen || le.bypass {
		le.ended = true
		return nil
	}
	// Each part returns what it holds: the acquire's amounts plus the
	// adjustments that reached it (an adjust or an earlier rollback may
	// have reached one part only).
	err := le.applyEach(ctx, "rollback", func(part *leasePart) map[string]int64 {
		back := part.held()
		for name, v := range back {
			back[name] = -v
		}
		return back
	})
	if err == nil || store.OutcomeUnknown(err) || !storeDown(err) {
		le.ended = true
	}
	return err
}

// Commit ends the lease, keeping what it charged. It does no I/O, except
// for a lease that holds a concurrency cap's slots: Commit gives them back
// with one write per bucket (the buckets' writes made together, bounded
// by the time a cascade's compensation has), which also ends the lease
// when it fails (the slots then come back on their own after the cap's
// TTL); its error is then an *UnavailableError. A slot
// whose TTL has passed (by the limiter's clock) is given back without a
// write.
func (le *Lease) Commit() error {
	if err := le.valid(); err != nil {
		return err
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.ended {
		return ErrLeaseEnded
	}
	le.ended = true
	if le.failedOpen || le.bypass || !le.holdsSlots() {
		return nil
	}
	ctx, cancel := le.l.detached(context.Background()) // bounded, as a compensation is
	defer cancel()
	return le.applyEach(ctx, "commit", (*leasePart).capRelease)
}

// applyEach charges each part of the lease what amounts(part) says, in
// millitokens (zero amounts charge nothing), records what reached it, and
// keeps the item its write returned for Limits. The parts' writes go out
// together (one round trip for a cascade, or several resources).
func (le *Lease) applyEach(ctx context.Context, op string, amounts func(*leasePart) map[string]int64) error {
	l := le.l
	trv := l.newTrace(op, le.parts[0].p.Ref.Entity, le.parts[0].p.Ref.Resource)
	tr := &trv
	type settling struct {
		part *leasePart
		amts map[string]int64
		m    *engine.Adjust
		step engine.Step
	}
	var ss []settling
	now := l.nowMs()
	for i := range le.parts {
		part := &le.parts[i]
		amts := amounts(part)
		if !anyNonZero(amts) {
			continue
		}
		if part.pooled && l.pools != nil && l.settleWithPool(part, amts) {
			tr.ev.Path = PathPool
			continue
		}
		m := engine.NewAdjust(l.mem, part.p.WithAmounts(amts), part.shard, part.n)
		ss = append(ss, settling{part, amts, m, m.Start(now)})
	}
	// The I/O loop of every part's machine: the calls they ask for go out
	// together, each result fed back to its machine.
	for {
		var batch engine.CascadeStep
		var who []int
		for i, x := range ss {
			if x.step.Call != nil {
				batch.Calls = append(batch.Calls, x.step.Call)
				batch.Paths = append(batch.Paths, x.step.Path)
				who = append(who, i)
			}
		}
		if len(who) == 0 {
			break
		}
		for _, p := range batch.Paths {
			tr.path(p)
		}
		rs := l.calls(ctx, tr, batch)
		now = l.nowMs()
		for j, i := range who {
			ss[i].step = ss[i].m.Feed(rs[j], now)
		}
	}
	var err error
	for _, x := range ss {
		tr.path(x.step.Path)
		part := x.part
		if x.step.Err != nil {
			err = errors.Join(err, x.step.Err)
			if store.OutcomeUnknown(x.step.Err) {
				// The write may have applied: its refunds count as made (a
				// later refund must not return them again), its charges as
				// not made (nor return what may never have been taken).
				for name, d := range x.amts {
					if d < 0 {
						part.addNet(name, d)
					}
				}
			}
			continue
		}
		for name, d := range x.amts {
			part.addNet(name, d)
		}
		if x.m.Img != nil {
			part.img, part.n, part.at, part.ok = x.m.Img, x.m.N, now, false
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrValidation):
		// The store refused the numbers: a balance would overflow what it
		// can hold. Bad input, not an unavailable store.
		err = &ValidationError{Field: "Adjust", Rule: "the bucket's balance would leave the range a stored number holds: " + err.Error()}
	default:
		err = l.storeErr(ctx, op, err)
	}
	l.observe(tr, err, Succeeded)
	return err
}

func anyNonZero(amounts map[string]int64) bool {
	for _, v := range amounts {
		if v != 0 {
			return true
		}
	}
	return false
}

// settleWithPool applies a pooled lease's correction to the pool instead
// of the store, when the pool is alive on the lease's shard: a refund goes
// back into it, a further charge comes out of it if it holds enough.
func (l *Limiter) settleWithPool(part *leasePart, milli map[string]int64) bool {
	now := l.nowMs()
	refund := true
	for _, v := range milli {
		if v > 0 {
			refund = false
		}
	}
	var ok bool
	if refund {
		ok = l.pools.Give(part.p.Plan, part.shard, milli, now)
	} else {
		ok = l.pools.Debit(part.p.Plan, part.shard, milli, now)
	}
	if !ok {
		return false
	}
	for name, d := range milli {
		part.addNet(name, d)
	}
	// The states show the pool's holdings now, over the last item of the
	// bucket the limiter saw.
	if img := l.mem.View(part.p.Ref, int(part.shard)).Img; img != nil {
		part.img = img
	}
	part.at, part.ok = now, false
	return true
}

// held returns the millitokens the part holds per limit: what the acquire
// charged plus what adjusts added, less what they returned (zeros left
// out). A lease never returns more than this.
func (part *leasePart) held() map[string]int64 {
	h := part.p.Amounts()
	for name, v := range part.net {
		h[name] += v
	}
	for name, v := range h {
		if v == 0 {
			delete(h, name)
		}
	}
	return h
}

// addNet adds d millitokens to what adjusts added to the part's limit
// name.
func (part *leasePart) addNet(name string, d int64) {
	if part.net == nil {
		part.net = make(map[string]int64, 2)
	}
	part.net[name] += d
}

// oneLease returns a lease of one bucket.
func oneLease(l *Limiter, part leasePart) *Lease {
	return &Lease{l: l, parts: []leasePart{part}}
}
