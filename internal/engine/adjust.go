package engine

import (
	"errors"

	"github.com/shardlimit/limiter/store"
)

// Adjust is the machine of one correction on the shard an acquire
// charged: positive amounts charge more (debt allowed), negative ones
// refund. It never refuses. Create it with NewAdjust, then Start and Feed.
type Adjust struct {
	m     *Memory
	p     *Plan
	shard int
	n     int64

	attempts int
	creating bool
	put      *store.Item

	// Vanished is set when Done if a refund found the shard gone (expired):
	// nothing was written, and nothing needed to be.
	Vanished bool
	// Img and N are set when Done after a write: the item the write left
	// (ALL_NEW, or the item a create put) and the shard count it was made
	// at. Img is nil when nothing was written or the item did not decode.
	Img *Image
	N   int64
}

// NewAdjust returns the machine that applies p's amounts (see
// Plan.WithAmounts) to a shard of n.
func NewAdjust(m *Memory, p *Plan, shard int, n int64) *Adjust {
	return &Adjust{m: m, p: p, shard: shard, n: n}
}

// Start returns the first step: the guarded ADD (Done at once when the
// plan charges nothing).
func (a *Adjust) Start(now int64) Step {
	if _, releases := a.p.holding(); releases {
		// A pool's return (see hold.go).
		ex, err := build(func(k *builder) { a.p.emitReturn(k, a.n, now) })
		if err != nil {
			return Step{Err: err}
		}
		return a.update(ex, PathAdjust)
	}
	if !a.p.releasesAt(now) {
		return Step{Done: true}
	}
	ex, err := a.p.adjust(a.n, now)
	if err != nil {
		return Step{Err: err}
	}
	return a.update(ex, PathAdjust)
}

func (a *Adjust) update(ex store.Expr, path Path) Step {
	in := store.UpdateInput{Key: a.p.Ref.WithShard(a.shard).Key(), Expr: ex,
		Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}
	return Step{Path: path, Call: &Call{Update: &in}}
}

// Feed takes the result of the last call and returns the next step.
func (a *Adjust) Feed(r Result, now int64) Step {
	lat := r.latency(now)
	if r.Err == nil {
		if a.creating {
			img, _ := Decode(*a.put)
			a.m.learn(a.p.Ref, a.shard, img, 0, now, lat, a.p)
			a.Img = img
		} else if img, err := Decode(r.Write.Attributes); err == nil && img != nil {
			a.m.learn(a.p.Ref, a.shard, img, 0, now, lat, a.p)
			a.Img = img
		}
		a.N = a.n
		return Step{Done: true}
	}
	im, err := conditionImage(r.Err)
	if err != nil {
		return Step{Err: err}
	}
	a.attempts++
	if a.attempts > maxSlowAttempts {
		return Step{Err: errors.New("limiter: adjust lost every race on " + a.p.Ref.WithShard(a.shard).PK())}
	}
	if im == nil {
		return a.create(now)
	}
	a.creating = false
	a.m.learn(a.p.Ref, a.shard, im, 0, now, lat, nil)
	if _, releases := a.p.holding(); releases &&
		(!im.holds || im.gen != a.p.gen || im.shardCount != a.n || im.hash != a.p.hash) {
		// A return whose generation was reclaimed (or whose bucket changed
		// shape): its hold is gone, and its rest with it, as a crash's.
		a.Vanished = true
		return Step{Done: true}
	}
	if a.shard == 0 {
		// Shard 0 holds the count in force, also when the bucket expired
		// and was made again at fewer shards than the lease knew.
		a.n = im.shardCount
	} else {
		a.n = max(a.n, im.shardCount)
	}
	if im.hash != a.p.hash {
		// Configuration changed since the acquire: charge the limits that
		// still exist, without the guard (a rare, bounded inexactness).
		ex, ok, err := a.p.adjustLoose(im)
		if err != nil || !ok {
			return Step{Done: err == nil, Err: err}
		}
		return a.update(ex, PathAdjust)
	}
	ex, err := a.p.normal(im, a.n, now, false, nil)
	if err != nil {
		return Step{Err: err}
	}
	return a.update(ex, PathNormal)
}

// create handles a shard that no longer exists. It expired, so it was full
// (its expiry covers any debt): a refund has nothing to return to, and a
// charge applies to a full bucket, so the shard is made with the charge
// taken.
func (a *Adjust) create(now int64) Step {
	positive := false
	for i := range a.p.specs {
		if a.p.specs[i].amount > 0 {
			positive = true
		}
	}
	if !positive {
		a.Vanished = true
		return Step{Done: true}
	}
	put := a.p.createWith(a.shard, a.n, now, true)
	a.creating, a.put = true, &put.Item
	return Step{Path: PathCreate, Call: &Call{Put: &put}}
}
