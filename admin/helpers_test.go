package admin

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// env is one memsim table and the clients of a test story. Time moves only
// when the story says so.
type env struct {
	t      *testing.T
	ctx    context.Context
	clock  *memsim.ManualClock
	st     *memsim.Store
	events []limiter.Event
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, opts ...memsim.Option) *env {
	t.Helper()
	clock := memsim.NewManualClock(t0)
	e := &env{t: t, ctx: context.Background(), clock: clock}
	e.st = memsim.New(append([]memsim.Option{memsim.WithClock(clock)}, opts...)...)
	return e
}

// both is the two planes of one process: a limiter (with an empty cache)
// and an Admin that keeps it up to date (WithLimiter).
type both struct {
	*limiter.Limiter
	*Admin
}

// limiter returns new clients on the table in namespace "ns", configured
// by opts: each a limiter.Option or an Option. The limiter's events are
// recorded in e.events.
func (e *env) limiter(opts ...any) *both {
	e.t.Helper()
	lopts := []limiter.Option{limiter.WithClock(e.clock), limiter.WithRand(rand.New(rand.NewPCG(1, 2))),
		limiter.WithObserver(limiter.ObserverFunc(func(ev limiter.Event) { e.events = append(e.events, ev) }))}
	aopts := []Option{WithNamespace("ns"), WithClock(e.clock)}
	for _, o := range opts {
		switch o := o.(type) {
		case limiter.Option:
			lopts = append(lopts, o)
		case Option:
			aopts = append(aopts, o)
		default:
			e.t.Fatalf("option %T", o)
		}
	}
	a, err := New(e.st, aopts...)
	if err != nil {
		e.t.Fatal(err)
	}
	l, err := limiter.New(e.st, append([]limiter.Option{limiter.WithNamespace(a.ns)}, lopts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	a.lim = l
	return &both{l, a}
}

func (e *env) last() limiter.Event {
	e.t.Helper()
	if len(e.events) == 0 {
		e.t.Fatal("no event observed")
	}
	return e.events[len(e.events)-1]
}

func (e *env) bucketItem(entity, resource string, shard int) store.Item {
	return e.st.Peek(keys.Bucket{Namespace: "ns", Entity: entity, Resource: resource, Shard: shard}.Key())
}

func (e *env) mustAcquire(l *both, req limiter.Request) *limiter.Lease {
	e.t.Helper()
	le, err := l.Acquire(e.ctx, req)
	if err != nil {
		e.t.Fatalf("Acquire(%s, %v): %v", req.Entity, req.Consume, err)
	}
	return le
}

func (e *env) mustReject(l *both, req limiter.Request) *limiter.RateLimitedError {
	e.t.Helper()
	_, err := l.Acquire(e.ctx, req)
	var rl *limiter.RateLimitedError
	if !errors.As(err, &rl) {
		e.t.Fatalf("Acquire(%s, %v) = %v, want a rate limit", req.Entity, req.Consume, err)
	}
	return rl
}

var one = map[string]int64{"rpm": 1}

func rpm(n int64) []limiter.Limit { return []limiter.Limit{limiter.PerMinute("rpm", n)} }

func req(entity string, limits []limiter.Limit, consume map[string]int64) limiter.Request {
	return limiter.Request{Entity: entity, Resource: "gpt-4", Limits: limits, Consume: consume}
}
