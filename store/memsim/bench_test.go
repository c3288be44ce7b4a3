package memsim_test

import (
	"maps"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// limiterWrite returns a bucket item with five limits and the speculative
// acquire the limiter sends for it: 10 ADDs and SET rf, five ANDed
// conditions, ALL_NEW, old item on failure.
func limiterWrite(b *testing.B) (store.Item, store.UpdateInput) {
	limits := []string{"rpm", "tpm", "itpm", "otpm", "wcu"}
	it := bucketItem("api-key-123", "gpt-4", 0, "entity_id", "api-key-123", "resource", "gpt-4", "rf", int64(1_767_225_600_000), "shard_count", 1)
	u := store.Update{}
	conds := []store.Condition{store.Name(store.AttrPK).Exists()}
	value := store.Int
	for _, l := range limits {
		for _, f := range []string{"cp", "bx", "ra", "rp"} {
			it["b_"+l+"_"+f] = store.Int(100_000_000)
		}
		it["b_"+l+"_tk"] = store.Int(1 << 60)
		it["b_"+l+"_tc"] = store.Int(0)
		u = u.Add("b_"+l+"_tk", value(-1000)).Add("b_"+l+"_tc", value(1000))
		if l != "otpm" {
			conds = append(conds, store.Name("b_"+l+"_tk").GreaterThanEqual(value(1000)))
		}
	}
	u = u.Set("rf", value(1_767_225_600_001))
	e, err := store.Build(u, store.And(conds...))
	if err != nil {
		b.Fatal(err)
	}
	k, _ := it.Key()
	return it, store.UpdateInput{Key: k, Expr: e, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}
}

// BenchmarkConditionalUpdate measures the limiter's hot-path write on one
// item, partition ceilings on (the clock moves 1 ms per write, refilling
// exactly the 1 WCU it costs). The Expr is made once: making it is the
// caller's work.
func BenchmarkConditionalUpdate(b *testing.B) {
	for _, bc := range []struct {
		name           string
		stream, shared bool
	}{
		{"stream=on", true, false},
		{"stream=off", false, false},
		{"stream=on/shared", true, true},
		{"stream=off/shared", false, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			clk := memsim.NewManualClock(memsim.Epoch())
			s := memsim.New(memsim.WithClock(clk), memsim.WithStream(bc.stream), memsim.WithSharedResults(bc.shared))
			it, in := limiterWrite(b)
			mustPut(b, s, it)
			if size := memsim.ItemSize(it); size > 1024 {
				b.Fatalf("item of %d bytes: more than 1 WCU", size)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := range b.N {
				clk.Add(time.Millisecond)
				out, err := s.Update(ctx, in)
				if err != nil || out.Consumed.WriteUnits != 1 {
					b.Fatalf("update %d: %v %+v", i, err, out.Consumed)
				}
				if bc.stream && i%64 == 63 {
					// A consumer keeping up, 64 records at a time (the
					// simulator reads after every request): a backlog of
					// thousands would measure the garbage collector
					// scanning it, not the write.
					s.TrimStream(s.StreamLen())
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func BenchmarkGet(b *testing.B) {
	s := memsim.New(memsim.WithPartitionLimits(0, 0))
	it, in := limiterWrite(b)
	mustPut(b, s, it)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(ctx, store.GetInput{Key: in.Key, ConsistentRead: true}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPut(b *testing.B) {
	s := memsim.New(memsim.WithPartitionLimits(0, 0))
	it, _ := limiterWrite(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Put(ctx, store.PutInput{Item: it}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkItemClone is the yardstick: one copy of the benchmark's
// 40-attribute bucket item, the least an update of an immutable item costs.
func BenchmarkItemClone(b *testing.B) {
	it, _ := limiterWrite(b)
	b.ReportAllocs()
	var sink store.Item
	for b.Loop() {
		sink = maps.Clone(it)
	}
	_ = sink
}
