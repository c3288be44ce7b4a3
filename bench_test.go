package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// BenchmarkAcquire measures the library's overhead on the hot path: an
// admitted speculative acquire of two limits on memsim. Compare with
// BenchmarkBareUpdate, the same conditional write issued directly.
// Limits are far above the load so that every acquire is admitted.
func BenchmarkAcquire(b *testing.B) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock), memsim.WithStream(false), memsim.WithPartitionLimits(0, 0))
	l, err := New(st, WithClock(clock), WithNamespace("bench"))
	if err != nil {
		b.Fatal(err)
	}
	r := Request{Entity: "k", Resource: "gpt-4", Consume: map[string]int64{"rpm": 1, "tpm": 1},
		Limits: []Limit{PerMinute("rpm", MaxTokens/2), PerMinute("tpm", MaxTokens/2)}}
	ctx := context.Background()
	if _, err := l.Acquire(ctx, r); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clock.Add(2 * time.Millisecond) // 500 writes a second: under the hidden wcu limit
		if _, err := l.Acquire(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBareUpdate is the floor under BenchmarkAcquire: a conditional
// ADD of the same shape straight to memsim, from a compiled template as the
// limiter's writes are (memsim runs those without parsing).
func BenchmarkBareUpdate(b *testing.B) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock), memsim.WithStream(false), memsim.WithPartitionLimits(0, 0))
	ctx := context.Background()
	key := store.Key{PK: "p", SK: "s"}
	u := store.Update{}
	var conds []store.Condition
	var vals []store.Value
	slot := func(v int64) store.Value { vals = append(vals, store.Int(v)); return store.Slot(len(vals) - 1) }
	for _, n := range []string{"rpm", "tpm", "wcu"} {
		u = u.Add("b_"+n+"_tk", slot(-1)).Add("b_"+n+"_tc", slot(1)).Add("b_"+n+"_fl", slot(0)).Add("b_"+n+"_fh", slot(1))
		conds = append(conds, store.Name("b_"+n+"_tk").GreaterThanEqual(slot(-1<<62)), store.Name("b_"+n+"_fl").GreaterThan(slot(-1)))
	}
	conds = append(conds, store.Name("lh").Exists(), store.Name("shard_count").Exists())
	tmpl := store.MustCompile(u, store.And(conds...))
	init := store.Update{}.Set("lh", store.Int(1)).Set("shard_count", store.Int(1))
	for _, n := range []string{"rpm", "tpm", "wcu"} {
		init = init.Set("b_"+n+"_tk", store.Int(1<<60)).Set("b_"+n+"_fl", store.Int(0))
	}
	seed := store.MustBuild(init, store.Condition{})
	if _, err := st.Update(ctx, store.UpdateInput{Key: key, Expr: seed}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in := store.UpdateInput{Key: key, Expr: tmpl.Compact(vals), Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}
		if _, err := st.Update(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
