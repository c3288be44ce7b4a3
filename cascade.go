package limiter

import (
	"context"
	"errors"
	"time"

	"github.com/shardlimit/limiter/store"
)

// cascadeSide is one of the two buckets of a cascading acquire.
type cascadeSide struct {
	p     *plan
	shard int
	n     int64
	img   *image // the item as last seen; nil before the first failure
	known bool   // img reflects a store answer (nil then means missing)
}

// cascade charges the entity's bucket and its parent's, all or nothing as
// the caller sees it. Fast path: both blind writes at once (the store's
// WriteConcurrently, one round trip); if exactly one fails, the other is
// compensated by adding its charge back. Slow path: one transaction of the
// two writes the returned items call for.
func (l *Limiter) cascade(ctx context.Context, tr *trace, child, parent *plan) (*Lease, error) {
	sides := [2]*cascadeSide{{p: child}, {p: parent}}
	for _, s := range sides {
		s.n = l.shardCount(s.p.ref)
		s.shard = l.pickShard(s.n, nil)
	}
	now := l.nowMs()
	writes := make([]store.Write, 2)
	for i, s := range sides {
		ref := s.p.ref.WithShard(s.shard)
		ex, _, err := s.p.blind(l.cachedImage(ref), s.n, now)
		if err != nil {
			return nil, err
		}
		writes[i] = store.Write{Update: &store.UpdateInput{Key: ref.Key(), Expr: ex,
			Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}}
	}
	tr.ev.Path = PathSpeculative
	res := l.st.WriteConcurrently(ctx, writes)
	tr.ev.RoundTrips++
	okCount := 0
	for i, r := range res {
		tr.ev.ReadUnits += r.Output.Consumed.ReadUnits
		tr.ev.WriteUnits += r.Output.Consumed.WriteUnits
		if errors.Is(r.Err, store.ErrThrottled) {
			tr.ev.Throttled++
		}
		if r.Err == nil {
			okCount++
			out := l.success(sides[i].p.ref.WithShard(sides[i].shard), r.Output, sides[i].n)
			sides[i].img, sides[i].known, sides[i].n = out.img, true, out.n
		}
	}
	if okCount == 2 {
		return l.cascadeLease(sides, false), nil
	}
	var firstErr error
	for i, r := range res {
		if r.Err == nil {
			// Undo: return this side's charge (a refund needs no guard).
			// Not the wcu charge: the write happened and was billed.
			s := sides[i]
			back := make(map[string]int64)
			for j := range s.p.specs {
				if a := s.p.specs[j].amount; a != 0 && !s.p.specs[j].hidden {
					back[s.p.specs[j].limit.Name] = -a
				}
			}
			if err := l.adjustShard(ctx, tr, s.p, s.p.ref.WithShard(s.shard), s.n, back); err != nil {
				// The charge stands and we cannot say it does not: report unavailability.
				return nil, err
			}
			s.known = false
			continue
		}
		im, err := l.conditionImage(r.Err)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		sides[i].img, sides[i].known = im, err == nil
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return l.cascadeSlow(ctx, tr, sides)
}

// cascadeLease is the lease of a cascade; charged says the sides' images
// predate the charge (a transaction returns no item).
func (l *Limiter) cascadeLease(sides [2]*cascadeSide, charged bool) *Lease {
	le := &Lease{l: l}
	now := l.nowMs()
	for _, s := range sides {
		le.parts = append(le.parts, leasePart{p: s.p, shard: s.shard, n: s.n, states: s.p.statesAfter(s.img, s.n, now, charged)})
	}
	return le
}

// maxCascadeAttempts bounds cascadeSlow's transactions. A transaction
// loses to a write on either of its two items, and a parent is shared by
// all its children: in the cascade scenario (40 keys a project, parents
// asked for two to four times their rate) ten attempts left 1.7 % of
// acquires refused after losing every race, twenty leave 0.17 %, for 0.08
// more round trips per acquire.
const maxCascadeAttempts = 2 * maxSlowAttempts

// cascadeSlow charges both buckets in one transaction, from the items the
// failed writes returned, retrying with the fresh items a cancellation
// returns.
func (l *Limiter) cascadeSlow(ctx context.Context, tr *trace, sides [2]*cascadeSide) (*Lease, error) {
	for attempt := 0; attempt < maxCascadeAttempts; attempt++ {
		now := l.nowMs()
		actions := make([]store.TransactAction, 2)
		restart := false
		for i, s := range sides {
			ref := s.p.ref.WithShard(s.shard)
			if !s.known { // refresh a compensated side
				out, err := l.st.Get(ctx, store.GetInput{Key: ref.Key(), ConsistentRead: true})
				tr.add(out.Consumed, err)
				if err != nil {
					return nil, err
				}
				im, err := decodeImage(out.Item)
				if err != nil {
					return nil, err
				}
				s.img, s.known = im, true
			}
			if s.img == nil {
				if s.shard != 0 {
					// A new shard starts empty (see plan.create): make it, then
					// serve this request on another shard.
					_, err := l.st.Put(ctx, s.p.create(ref, s.n, now))
					tr.add(store.Capacity{}, err)
					if err != nil && !errors.Is(err, store.ErrConditionFailed) {
						return nil, err
					}
					s.shard, s.known, restart = l.pickShard(s.n, []int{s.shard}), false, true
					continue
				}
				put := s.p.create(ref, s.n, now)
				actions[i] = store.TransactAction{Put: &put}
				continue
			}
			if ref.Shard == 0 || s.img.shardCount > s.n {
				s.n = s.img.shardCount
			}
			switch s.p.shortfall(s.img, s.n, now, l.cachedImage(ref).hot()) {
			case shortApp:
				// Refused; but the caller must wait for both sides, so look
				// at the other one before answering.
				rl := s.p.rateLimited(s.img, s.n, now)
				rl.Parent = i == 1
				if other := sides[1-i]; other.known && other.img != nil &&
					other.p.shortfall(other.img, other.n, now, false) == shortApp {
					orl := other.p.rateLimited(other.img, other.n, now)
					orl.Parent = i != 1
					if orl.RetryAfter > rl.RetryAfter {
						rl = orl
					}
				}
				tr.ev.Path = PathReject
				return nil, rl
			case shortWCU:
				m, err := l.double(ctx, tr, s.p, s.n)
				if err != nil {
					return nil, err
				}
				if m == s.n {
					return nil, &store.ThrottledError{Code: store.ThrottleProvisionedThroughputExceeded,
						Reason: "limiter: bucket at its shard limit", Key: ref.Key()}
				}
				s.n, s.shard, s.known, restart = m, l.pickShard(m, nil), false, true
				continue
			}
			ex, _, err := s.p.informed(s.img, s.n, now, attempt > 0)
			if err != nil {
				return nil, err
			}
			actions[i] = store.TransactAction{Update: &store.UpdateInput{Key: ref.Key(), Expr: ex, ReturnOldOnConditionFailure: true}}
		}
		if restart {
			continue
		}
		tr.ev.Path = PathNormal
		out, err := l.st.TransactWrite(ctx, store.TransactWriteInput{Actions: actions})
		tr.add(out.Consumed, err)
		if err == nil {
			for _, s := range sides {
				l.remember(s.p.ref.WithShard(s.shard), nil, s.n)
			}
			return l.cascadeLease(sides, true), nil
		}
		var tc *store.TransactionCanceledError
		if !errors.As(err, &tc) {
			return nil, err
		}
		for i, r := range tc.Reasons {
			if i >= 2 {
				break
			}
			switch r.Code {
			case store.ReasonConditionalCheckFailed:
				im, err := decodeImage(r.Item)
				if err != nil {
					return nil, err
				}
				sides[i].img, sides[i].known = im, true
			case store.ReasonNone:
			default: // conflict or throttling on this item: read it again
				sides[i].known = false
			}
		}
	}
	tr.ev.Path = PathReject
	return nil, &RateLimitedError{Entity: sides[0].p.ref.Entity, Resource: sides[0].p.ref.Resource, RetryAfter: time.Millisecond}
}
