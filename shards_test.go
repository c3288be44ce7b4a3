package limiter

import (
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store/memsim"
)

// shardedEnv is a table whose bucket (entity, "r") has 4 shards, every one
// of them existing and full: created at one shard, doubled twice, then
// touched by a client until every shard exists, then refilled.
func shardedEnv(t *testing.T, entity string, limits []Limit, opts ...Option) (*env, *Limiter) {
	t.Helper()
	e := newEnv(t, memsim.WithPartitionLimits(0, 0))
	l := e.limiter(append([]Option{WithLocalRefusals(false)}, opts...)...)
	r := Request{Entity: entity, Resource: "r", Limits: limits, Consume: map[string]int64{limits[0].Name: 1}}
	e.mustAcquire(l, r)
	ref := keys.Bucket{Namespace: "ns", Entity: entity, Resource: "r"}
	for _, from := range []int64{1, 2} {
		if _, err := e.st.Update(e.ctx, keys.DoubleShards(ref, from, keys.LimitsOf(e.st.Peek(ref.Key())))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 40; i++ {
		_, _ = l.Acquire(e.ctx, r) // new shards start empty: refusals are fine
	}
	for s := 0; s < 4; s++ {
		if e.bucketItem(entity, "r", s) == nil {
			t.Fatalf("shard %d of %s was never created", s, entity)
		}
	}
	e.clock.Add(time.Minute)
	return e, l
}

// shardTC returns a limit's tc on each of the bucket's 4 shards.
func (e *env) shardTC(entity, limit string) [4]int64 {
	var tc [4]int64
	for s := range tc {
		tc[s], _ = e.bucketItem(entity, "r", s).Int("b_" + limit + "_tc")
	}
	return tc
}

// expectMoved checks that only shard moved, by want millitokens.
func (e *env) expectMoved(what string, before, after [4]int64, shard int, want int64) {
	e.t.Helper()
	for s := range before {
		d := after[s] - before[s]
		switch {
		case s == shard && d != want:
			e.t.Fatalf("%s: shard %d (the lease's) tc moved by %d, want %d (tc %v -> %v)", what, s, d, want, before, after)
		case s != shard && d != 0:
			e.t.Fatalf("%s: shard %d tc moved by %d, but the lease charged shard %d (tc %v -> %v)", what, s, d, shard, before, after)
		}
	}
}

// On a sharded bucket a lease remembers the shard it charged, and its
// Adjust and Rollback go to exactly that shard. A correction that lands
// on another one (shard 0, say) charges that shard twice and refunds the
// other one what it never gave: the shards no longer add up to the bucket.
func TestShardedLeaseCorrectsTheShardItCharged(t *testing.T) {
	limits := []Limit{PerSecond("rps", 400)}
	e, l := shardedEnv(t, "hot", limits)
	var le *Lease
	for i := 0; i < 40 && le == nil; i++ {
		got := e.mustAcquire(l, Request{Entity: "hot", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 2}})
		if got.Shard() != 0 {
			le = got
		}
	}
	if le == nil {
		t.Fatal("no acquire landed on a shard other than 0")
	}
	shard := le.Shard()
	before := e.shardTC("hot", "rps")
	if err := le.Adjust(e.ctx, map[string]int64{"rps": 3}); err != nil {
		t.Fatal(err)
	}
	after := e.shardTC("hot", "rps")
	e.expectMoved("Adjust(+3)", before, after, shard, 3_000)
	if err := le.Adjust(e.ctx, map[string]int64{"rps": -1}); err != nil {
		t.Fatal(err)
	}
	before, after = after, e.shardTC("hot", "rps")
	e.expectMoved("Adjust(-1)", before, after, shard, -1_000)
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	before, after = after, e.shardTC("hot", "rps")
	e.expectMoved("Rollback", before, after, shard, -4_000) // the charge of 2, plus 3, less 1
}

// A cascade whose child refuses returns the parent's charge to the shard
// of the parent's bucket that it charged.
func TestShardedCascadeUndoRefundsTheShardItCharged(t *testing.T) {
	parentLimits := []Limit{PerSecond("rps", 400)}
	e, l := shardedEnv(t, "project", parentLimits)
	if err := l.putEntity(e.ctx, items.Entity{ID: "project"}); err != nil {
		t.Fatal(err)
	}
	if err := l.putEntity(e.ctx, items.Entity{ID: "key", Parent: "project", Cascade: true}); err != nil {
		t.Fatal(err)
	}
	if err := l.putLimits(e.ctx, scope{Entity: "project"}, parentLimits); err != nil {
		t.Fatal(err)
	}
	child := []Limit{PerMinute("rps", 3)} // three acquires a minute: the rest refused
	r := Request{Entity: "key", Resource: "r", Limits: child, Consume: map[string]int64{"rps": 1}}
	for i := 0; i < 3; i++ {
		e.mustAcquire(l, r)
	}
	undos := 0
	for i := 0; i < 30; i++ {
		before := e.shardTC("project", "rps")
		_, err := l.Acquire(e.ctx, r)
		var rl *RateLimitedError
		if !errors.As(err, &rl) || rl.Parent {
			t.Fatalf("acquire %d: %v, want the child's refusal", i, err)
		}
		if after := e.shardTC("project", "rps"); after != before {
			t.Fatalf("acquire %d: refused, but the parent's shards moved: tc %v -> %v", i, before, after)
		}
		if ev := e.last(); ev.WriteUnits >= 3 { // child, parent, and the parent's undo
			undos++
		}
	}
	if undos < 5 {
		t.Fatalf("only %d refusals undid a parent charge: the story did not happen", undos)
	}
}
