package limiter

import (
	"context"
	"errors"
	"sync"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/store"
)

// Lease is what an Acquire charged: the bucket shard(s) and the amounts. It
// lets the caller correct the charge after the fact (Adjust), return it
// (Rollback), or settle it (Commit). A lease is safe for concurrent use;
// after Commit or Rollback every method returns ErrLeaseEnded.
type Lease struct {
	l     *Limiter
	parts []leasePart // the entity's bucket, then the cascade parent's

	mu         sync.Mutex
	ended      bool
	failedOpen bool
}

type leasePart struct {
	p      bucketPlan
	net    *netAmounts  // millitokens adjusted beyond the acquire, per limit (nil: none)
	states []LimitState // as the acquire's write left the bucket (computed when asked)
	// What the states are computed from: the item the write returned and
	// when (or, for a pooled part, the pool's holdings are added).
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
	if le == nil || le.l == nil || (len(le.parts) == 0 && !le.failedOpen) {
		return invalid("Lease", "is nil or zero: use the lease Acquire returned")
	}
	return nil
}

// Limits returns the state of the entity's limits as the acquire left
// them, in name order: the limit that applied, the tokens remaining and the
// time until full, from the item the write returned (no store call). It
// does not change with later Adjust calls. It is nil for a lease granted
// under fail-open, and for a nil Lease.
func (le *Lease) Limits() []LimitState {
	if le == nil || len(le.parts) == 0 {
		return nil
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.limitStates(0)
}

// ParentLimits returns the state of the cascade parent's limits as the
// acquire left them (see Limits); nil without a cascade.
func (le *Lease) ParentLimits() []LimitState {
	if le == nil || len(le.parts) < 2 {
		return nil
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.limitStates(1)
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
// tokens. Limits a cascade parent also has are adjusted there too.
//
// Adjust is one write when the bucket is below its burst, two when it must
// first materialize a refill; it never rejects.
func (le *Lease) Adjust(ctx context.Context, delta map[string]int64) error {
	if err := le.valid(); err != nil {
		return err
	}
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.ended {
		return ErrLeaseEnded
	}
	if le.failedOpen {
		return nil
	}
	for name, d := range delta {
		if d < -MaxTokens || d > MaxTokens {
			return invalid("Adjust["+name+"]", "%d must be between -%d and %d tokens", d, MaxTokens, MaxTokens)
		}
		if !le.parts[0].p.Has(name) {
			return invalid("Adjust["+name+"]", "the lease has no limit named %q", name)
		}
	}
	// delta itself, scaled as it is read: no map of millitokens to build.
	return le.applyEach(ctx, "adjust", bucket.MilliPerToken, func(*leasePart) map[string]int64 { return delta })
}

// Rollback returns everything the lease charged, adjustments included, and
// ends it. Use it when the work the tokens paid for did not happen.
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
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.ended {
		return ErrLeaseEnded
	}
	if le.failedOpen {
		le.ended = true
		return nil
	}
	// Each part returns what it was charged: the acquire's amounts plus the
	// adjustments that reached it (an adjust or an earlier rollback may
	// have reached one part only).
	err := le.applyEach(ctx, "rollback", 1, func(part *leasePart) map[string]int64 {
		back := part.p.Amounts()
		for name, a := range back {
			if v := -(a + part.net.get(name)); v != 0 {
				back[name] = v
			} else {
				delete(back, name)
			}
		}
		return back
	})
	if err == nil || store.OutcomeUnknown(err) || !storeDown(err) {
		le.ended = true
	}
	return err
}

// Commit ends the lease, keeping what it charged. It does no I/O.
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
	return nil
}

// applyEach charges each part of the lease what amounts(part) says, times
// scale millitokens (zero amounts charge nothing), and records what
// reached it.
func (le *Lease) applyEach(ctx context.Context, op string, scale int64, amounts func(*leasePart) map[string]int64) error {
	l := le.l
	trv := l.newTrace(op, le.parts[0].p.Ref.Entity, le.parts[0].p.Ref.Resource)
	tr := &trv
	var err error
	for i := range le.parts {
		part := &le.parts[i]
		amts := amounts(part)
		if !anyNonZero(amts) {
			continue
		}
		if part.pooled && l.pools != nil && l.settleWithPool(part, scaled(amts, scale)) {
			tr.ev.Path = PathPool
			continue
		}
		m := engine.NewAdjust(l.mem, part.p.WithAmounts(scaled(amts, scale)), part.shard, part.n)
		now := l.nowMs()
		step, _ := l.drive(ctx, tr, now, m.Start(now), m.Feed)
		if step.Err != nil {
			err = errors.Join(err, step.Err)
			continue
		}
		for name, d := range amts {
			if d != 0 && part.p.Has(name) {
				part.addNet(name, d*scale)
			}
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, store.ErrValidation):
		// The store refused the numbers: a balance would overflow what it
		// can hold. Bad input, not an unavailable store.
		err = &ValidationError{Field: "Adjust", Rule: "the bucket's balance would leave the range a stored number holds: " + err.Error()}
	default:
		err = &UnavailableError{Op: op, Err: err}
	}
	l.observe(tr, err, Admitted)
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

// scaled returns the amounts times scale, zeros left out.
func scaled(amounts map[string]int64, scale int64) map[string]int64 {
	out := make(map[string]int64, len(amounts))
	for name, v := range amounts {
		if v != 0 {
			out[name] = v * scale
		}
	}
	return out
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
	return true
}

// addNet adds d millitokens to what adjusts added to the part's limit
// name.
func (part *leasePart) addNet(name string, d int64) {
	if part.net == nil {
		part.net = new(netAmounts)
		part.net.list = part.net.buf[:0]
	}
	part.net.add(name, d)
}

// netAmounts maps limit names to millitokens: a short list, as a lease part
// has few limits, in one allocation with room for two (a map cost two
// allocations and a few hundred bytes per adjusted lease).
type netAmounts struct {
	list []namedMilli
	buf  [2]namedMilli
}

type namedMilli struct {
	name string
	v    int64
}

// get returns name's amount (0 when absent, or n nil).
func (n *netAmounts) get(name string) int64 {
	if n == nil {
		return 0
	}
	for _, e := range n.list {
		if e.name == name {
			return e.v
		}
	}
	return 0
}

// add adds d to name's amount.
func (n *netAmounts) add(name string, d int64) {
	for i := range n.list {
		if n.list[i].name == name {
			n.list[i].v += d
			return
		}
	}
	n.list = append(n.list, namedMilli{name, d})
}

// oneLease returns a lease of one bucket.
func oneLease(l *Limiter, part leasePart) *Lease {
	return &Lease{l: l, parts: []leasePart{part}}
}
