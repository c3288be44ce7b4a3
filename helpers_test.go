package limiter

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// env is one memsim table and the limiters of a test story. Time moves only
// when the story says so.
type env struct {
	t      *testing.T
	ctx    context.Context
	clock  *memsim.ManualClock
	st     *memsim.Store
	events []Event
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, opts ...memsim.Option) *env {
	t.Helper()
	clock := memsim.NewManualClock(t0)
	e := &env{t: t, ctx: context.Background(), clock: clock}
	e.st = memsim.New(append([]memsim.Option{memsim.WithClock(clock)}, opts...)...)
	return e
}

// limiter returns a new limiter (a new client with an empty cache) on the
// table; its events are recorded in e.events.
func (e *env) limiter(opts ...Option) *Limiter {
	e.t.Helper()
	base := []Option{WithNamespace("ns"), WithClock(e.clock), WithRand(rand.New(rand.NewPCG(1, 2))),
		WithObserver(ObserverFunc(func(ev Event) { e.events = append(e.events, ev) }))}
	l, err := New(e.st, append(base, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *env) last() Event {
	e.t.Helper()
	if len(e.events) == 0 {
		e.t.Fatal("no event observed")
	}
	return e.events[len(e.events)-1]
}

// expectCost checks the last observed call's path and cost.
func (e *env) expectCost(path Path, roundTrips int, rcu, wcu float64) {
	e.t.Helper()
	ev := e.last()
	if ev.Path != path || ev.RoundTrips != roundTrips || ev.ReadUnits != rcu || ev.WriteUnits != wcu {
		e.t.Fatalf("last %s: path %v, %d round trips, %.1f RCU, %.1f WCU; want %v, %d, %.1f, %.1f (err %v)",
			ev.Op, ev.Path, ev.RoundTrips, ev.ReadUnits, ev.WriteUnits, path, roundTrips, rcu, wcu, ev.Err)
	}
}

func (e *env) bucketItem(entity, resource string, shard int) store.Item {
	return e.st.Peek(keys.Bucket{Namespace: "ns", Entity: entity, Resource: resource, Shard: shard}.Key())
}

// tokens returns the stored tk of a limit, in millitokens.
func (e *env) tokens(entity, resource, limit string) int64 {
	e.t.Helper()
	v, ok := e.bucketItem(entity, resource, 0).Int("b_" + limit + "_tk")
	if !ok {
		e.t.Fatalf("bucket %s/%s has no limit %s", entity, resource, limit)
	}
	return v
}

func (e *env) consumed(entity, resource, limit string) int64 {
	v, _ := e.bucketItem(entity, resource, 0).Int("b_" + limit + "_tc")
	return v
}

func (e *env) mustAcquire(l *Limiter, req Request) *Lease {
	e.t.Helper()
	le, err := l.Acquire(e.ctx, req)
	if err != nil {
		e.t.Fatalf("Acquire(%s, %v): %v", req.Entity, req.Consume, err)
	}
	return le
}

func (e *env) mustReject(l *Limiter, req Request) *RateLimitedError {
	e.t.Helper()
	_, err := l.Acquire(e.ctx, req)
	var rl *RateLimitedError
	if !errors.As(err, &rl) {
		e.t.Fatalf("Acquire(%s, %v) = %v, want a rate limit", req.Entity, req.Consume, err)
	}
	return rl
}

func rpm(n int64) []Limit { return []Limit{PerMinute("rpm", n)} }

func req(entity string, limits []Limit, consume map[string]int64) Request {
	return Request{Entity: entity, Resource: "gpt-4", Limits: limits, Consume: consume}
}

// The tests of this package store configuration as package admin does
// (the items of internal/items), without its audit trail: admin imports
// this package, so these tests cannot use it. Like an admin.Admin given
// the limiter (admin.WithLimiter), a change drops the limiter's cache.

// scope addresses stored limits (admin.Scope).
type scope struct{ Entity, Resource string }

// putEntity stores e.
func (l *Limiter) putEntity(ctx context.Context, e items.Entity) error {
	return l.putConfig(ctx, items.EntityItem(l.cfg.namespace, e))
}

// putLimits stores limits for s.
func (l *Limiter) putLimits(ctx context.Context, s scope, limits []Limit) error {
	return l.putScope(ctx, s, limits, "")
}

// putScope stores limits and a mode for s (neither: deletes its item).
func (l *Limiter) putScope(ctx context.Context, s scope, limits []Limit, mode string) error {
	ns := l.cfg.namespace
	k := keys.ResourceLimits(ns, s.Resource)
	if s.Entity != "" {
		r := s.Resource
		if r == "" {
			r = keys.AnyResource
		}
		k = keys.EntityLimits(ns, s.Entity, r)
	}
	it := items.LimitsItem(ns, k, s.Entity, s.Resource, limits, mode)
	if it == nil {
		_, err := l.st.Delete(ctx, store.DeleteInput{Key: k})
		l.Invalidate()
		return err
	}
	return l.putConfig(ctx, it)
}

func (l *Limiter) putConfig(ctx context.Context, it store.Item) error {
	_, err := l.st.Put(ctx, store.PutInput{Item: it})
	l.Invalidate()
	return err
}
