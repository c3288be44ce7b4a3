package limiter

import (
	"context"
	"errors"
	"sync"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Lease is what an Acquire charged: the bucket shard(s) and the amounts. It
// lets the caller correct the charge after the fact (Adjust), return it
// (Rollback), or settle it (Commit). A lease is safe for concurrent use;
// after Commit or Rollback every method returns ErrLeaseEnded.
type Lease struct {
	l          *Limiter
	parts      []leasePart // the entity's bucket, then the cascade parent's
	failedOpen bool

	mu    sync.Mutex
	ended bool
}

type leasePart struct {
	p      *plan
	shard  int
	n      int64
	net    map[string]int64 // millitokens adjusted beyond the acquire, per limit
	states []LimitState     // as the acquire's write left the bucket
}

// FailedOpen reports whether the lease was granted without charging
// because the store failed under the fail-open policy. Adjust and Rollback
// of such a lease do nothing.
func (le *Lease) FailedOpen() bool { return le.failedOpen }

// Limits returns the state of the entity's limits as the acquire left
// them, in name order: the limit that applied, the tokens remaining and the
// time until full, from the item the write returned (no store call). It
// does not change with later Adjust calls. It is nil for a lease granted
// under fail-open, and for a nil Lease.
func (le *Lease) Limits() []LimitState {
	if le == nil || len(le.parts) == 0 {
		return nil
	}
	return append([]LimitState(nil), le.parts[0].states...)
}

// ParentLimits returns the state of the cascade parent's limits as the
// acquire left them (see Limits); nil without a cascade.
func (le *Lease) ParentLimits() []LimitState {
	if le == nil || len(le.parts) < 2 {
		return nil
	}
	return append([]LimitState(nil), le.parts[1].states...)
}

// Shard returns the shard of the entity's bucket that was charged.
func (le *Lease) Shard() int {
	if len(le.parts) == 0 {
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
		if !le.parts[0].p.has(name) || name == wcuName {
			return invalid("Adjust["+name+"]", "the lease has no limit named %q", name)
		}
	}
	milli := make(map[string]int64, len(delta))
	for name, d := range delta {
		if d != 0 {
			milli[name] = d * bucket.MilliPerToken
		}
	}
	return le.apply(ctx, "adjust", milli)
}

// Rollback returns everything the lease charged, adjustments included, and
// ends it. Use it when the work the tokens paid for did not happen.
func (le *Lease) Rollback(ctx context.Context) error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.ended {
		return ErrLeaseEnded
	}
	le.ended = true
	if le.failedOpen {
		return nil
	}
	// Each part returns what it was charged: the acquire's amounts plus the
	// adjustments that reached it (an adjust may have failed on one part).
	return le.applyEach(ctx, "rollback", func(part *leasePart) map[string]int64 {
		back := make(map[string]int64)
		for i := range part.p.specs {
			s := &part.p.specs[i]
			if !s.hidden {
				if v := -(s.amount + part.net[s.limit.Name]); v != 0 {
					back[s.limit.Name] = v
				}
			}
		}
		return back
	})
}

// Commit ends the lease, keeping what it charged. It does no I/O.
func (le *Lease) Commit() error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.ended {
		return ErrLeaseEnded
	}
	le.ended = true
	return nil
}

func (le *Lease) apply(ctx context.Context, op string, milli map[string]int64) error {
	return le.applyEach(ctx, op, func(*leasePart) map[string]int64 { return milli })
}

// applyEach charges each part of the lease what amounts(part) says, in
// millitokens, and records what reached it.
func (le *Lease) applyEach(ctx context.Context, op string, amounts func(*leasePart) map[string]int64) error {
	l := le.l
	tr := &trace{ev: Event{Op: op, Entity: le.parts[0].p.ref.Entity, Resource: le.parts[0].p.ref.Resource}, start: l.callStart()}
	var err error
	for i := range le.parts {
		part := &le.parts[i]
		milli := amounts(part)
		if len(milli) == 0 {
			continue
		}
		if e := l.adjustShard(ctx, tr, part.p, part.p.ref.WithShard(part.shard), part.n, milli); e != nil {
			err = errors.Join(err, e)
			continue
		}
		if part.net == nil {
			part.net = make(map[string]int64)
		}
		for name, d := range milli {
			if part.p.has(name) {
				part.net[name] += d
			}
		}
	}
	if err != nil {
		err = &UnavailableError{Op: op, Err: err}
	}
	l.observe(tr, err, Admitted)
	return err
}

// adjustShard charges (d > 0) or refunds (d < 0) millitokens on one shard,
// without a floor: debt is allowed. A charge must not land on a bucket that
// is full at now (see paths.go), so it is conditional on fl > now; when that
// fails, the refill is materialized first under the rf lock.
func (l *Limiter) adjustShard(ctx context.Context, tr *trace, p *plan, ref keys.Bucket, n int64, milli map[string]int64) error {
	ap := p.withAmounts(milli)
	now := l.nowMs()
	if charged, _ := ap.chargedMask(); charged == 0 {
		return nil
	}
	ex, err := ap.build(pathAdjust, func(k sink) { ap.emitAdjust(k, n, now) })
	if err != nil {
		return err
	}
	tr.ev.Path = PathSpeculative
	_, err = l.update(ctx, tr, ref.Key(), ex)
	for attempt := 0; err != nil && attempt < maxSlowAttempts; attempt++ {
		im, ierr := l.conditionImage(err)
		if ierr != nil {
			return ierr
		}
		if im == nil {
			return nil // the bucket expired: it was full, the debt is forgiven
		}
		now = l.nowMs()
		n = max(n, im.shardCount)
		if im.hash != ap.hash {
			// Configuration changed since the acquire: charge the limits that
			// still exist, without the guard (a rare, bounded inexactness).
			return l.adjustLoose(ctx, tr, ap, ref, im)
		}
		tr.ev.Path = PathNormal
		if ex, err = ap.normal(im, n, now, false); err != nil {
			return err
		}
		_, err = l.update(ctx, tr, ref.Key(), ex)
	}
	return err
}

// emitAdjust charges (amount > 0) or refunds (amount < 0) each limit,
// without a floor.
func (p *plan) emitAdjust(k sink, n, now int64) {
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

func (l *Limiter) adjustLoose(ctx context.Context, tr *trace, ap *plan, ref keys.Bucket, im *image) error {
	u := store.Update{}
	var conds []store.Condition
	for i := range ap.specs {
		s := &ap.specs[i]
		if _, _, _, ok := im.state(s); !ok || s.amount == 0 {
			continue
		}
		u = u.Add(s.tk, store.Int(-s.amount)).Add(s.tc, store.Int(s.amount))
		conds = append(conds, store.Name(s.tk).Exists())
	}
	if u.Len() == 0 {
		return nil
	}
	ex, err := store.Build(u, store.And(conds...))
	if err != nil {
		return err
	}
	_, err = l.update(ctx, tr, ref.Key(), ex)
	if errors.Is(err, store.ErrConditionFailed) {
		return nil // the limits went away meanwhile
	}
	return err
}

// withAmounts returns a copy of p charging the given millitokens (absent
// names charge nothing).
func (p *plan) withAmounts(milli map[string]int64) *plan {
	q := &plan{ref: p.ref, hash: p.hash, pt: p.pt, specs: append([]spec(nil), p.specs...)}
	for i := range q.specs {
		q.specs[i].amount = milli[q.specs[i].limit.Name]
	}
	return q
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
