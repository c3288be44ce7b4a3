package engine

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// perSecond returns a limit of n tokens a second.
func perSecond(name string, n int64) Limit {
	return Limit{Name: name, Limit: bucket.Limit{Capacity: n * 1000, Burst: n * 1000, RefillAmount: n * 1000, RefillPeriod: 1000}}
}

// perMinute returns a limit of n tokens a minute.
func perMinute(name string, n int64) Limit {
	return Limit{Name: name, Limit: bucket.Limit{Capacity: n * 1000, Burst: n * 1000, RefillAmount: n * 1000, RefillPeriod: 60_000}}
}

var bucketRef = keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}

// call makes one engine call on st, as the root package's loop does.
func call(ctx context.Context, st store.Store, c *Call) Result {
	var r Result
	switch {
	case c.Update != nil:
		r.Write, r.Err = st.Update(ctx, *c.Update)
	case c.Put != nil:
		r.Write, r.Err = st.Put(ctx, *c.Put)
	case c.Query != nil:
		r.Query, r.Err = st.Query(ctx, *c.Query)
	case c.BatchGet != nil:
		r.Batch, r.Err = st.BatchGet(ctx, *c.BatchGet)
	case c.Transact != nil:
		r.Write, r.Err = st.TransactWrite(ctx, *c.Transact)
	}
	return r
}

// drive runs a machine against st until it answers; it returns the answer
// and the paths of the calls made.
func drive(st store.Store, now func() int64, step Step, feed func(Result, int64) Step) (Step, []Path) {
	var paths []Path
	for step.Call != nil {
		paths = append(paths, step.Path)
		step = feed(call(context.Background(), st, step.Call), now())
	}
	return step, paths
}

// chargeOn runs a charge of p by a process with memory m against st
// until it answers, at the times now gives.
func chargeOn(st store.Store, m *Memory, now func() int64, p *Plan) Step {
	c := NewCharge(m, p, newRand(1), Options{})
	step, _ := drive(st, now, c.Start(now()), c.Feed)
	return step
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

// viewOf returns what the memory holds of a shard and its entry (made if
// missing), as a charge's first write to the shard sees them.
func (m *Memory) viewOf(ref keys.Bucket, shard int) (ShardView, *shardInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	si := m.shardOf(ref, shard)
	return si.view(), si
}

// pendingDoubling returns the shard count this client is trying to double
// ref from (0 for none), as a charge starts from it.
func (m *Memory) pendingDoubling(ref keys.Bucket, now int64) int64 {
	_, from := m.begin(ref, now)
	return from
}
