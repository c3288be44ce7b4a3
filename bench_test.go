package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// benchRequest is an acquire of two limits whose buckets drain slowly
// (a refill of one token an hour against one taken per acquire), so that
// every acquire is admitted on the hot path: one speculative ADD.
func benchRequest() Request {
	slow := func(name string) Limit {
		return Limit{Name: name, Capacity: MaxTokens / 2, Refill: 1, Period: time.Hour}
	}
	return Request{Entity: "k", Resource: "gpt-4", Consume: map[string]int64{"rpm": 1, "tpm": 1},
		Limits: []Limit{slow("rpm"), slow("tpm")}}
}

// BenchmarkAcquire measures the library's overhead on the hot path: an
// admitted speculative acquire of two limits on memsim. Compare with
// BenchmarkBareUpdate, the same conditional write on the same item issued
// directly.
func BenchmarkAcquire(b *testing.B) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock), memsim.WithStream(false), memsim.WithPartitionLimits(0, 0))
	var speculative int
	l, err := New(st, WithClock(clock), WithNamespace("bench"), WithObserver(ObserverFunc(func(e Event) {
		if e.Path == PathSpeculative {
			speculative++
		}
	})))
	if err != nil {
		b.Fatal(err)
	}
	r := benchRequest()
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		clock.Add(2 * time.Millisecond)
		if _, err := l.Acquire(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	speculative = 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clock.Add(2 * time.Millisecond) // 500 writes a second: under the hidden wcu limit
		if _, err := l.Acquire(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if speculative*100 < b.N*99 {
		b.Fatalf("%d of %d acquires took the speculative path, want 99%%", speculative, b.N)
	}
}

// recorder keeps a copy of the last update sent through it (a store keeps
// nothing of an input: the limiter reuses its values).
type recorder struct {
	store.Store
	last store.UpdateInput
}

func (r *recorder) Update(ctx context.Context, in store.UpdateInput) (store.WriteOutput, error) {
	r.last = in
	r.last.Expr = in.Expr.Clone()
	return r.Store.Update(ctx, in)
}

// BenchmarkBareUpdate is the floor under BenchmarkAcquire: the limiter's
// own speculative write (recorded from an acquire) sent again and again
// straight to memsim, on the same item. Every 256 writes the item is put
// back as it was (off the clock): a write that never moves rf drains the
// hidden wcu limit.
func BenchmarkBareUpdate(b *testing.B) {
	clock := memsim.NewManualClock(t0)
	st := memsim.New(memsim.WithClock(clock), memsim.WithStream(false), memsim.WithPartitionLimits(0, 0))
	rec := &recorder{Store: st}
	var last Path
	l, err := New(rec, WithClock(clock), WithNamespace("bench"), WithObserver(ObserverFunc(func(e Event) { last = e.Path })))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var before store.Item
	for i := 0; i < 11; i++ {
		clock.Add(2 * time.Millisecond)
		if i == 10 {
			out, err := st.Get(ctx, store.GetInput{Key: rec.last.Key, ConsistentRead: true})
			if err != nil {
				b.Fatal(err)
			}
			before = out.Item
		}
		if _, err := l.Acquire(ctx, benchRequest()); err != nil {
			b.Fatal(err)
		}
	}
	if last != PathSpeculative {
		b.Fatalf("recorded a %v write, want speculative", last)
	}
	in := rec.last
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%256 == 255 {
			b.StopTimer()
			if _, err := st.Put(ctx, store.PutInput{Item: before}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if _, err := st.Update(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
}
