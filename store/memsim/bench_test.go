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
// conditions, ALL_NEW, old item on failure. With template set, its Expr
// comes from a store.Template (the structured path), else from store.Build
// (the string path); both are the same request.
func limiterWrite(b *testing.B, template bool) (store.Item, store.UpdateInput) {
	limits := []string{"rpm", "tpm", "itpm", "otpm", "wcu"}
	it := bucketItem("api-key-123", "gpt-4", 0, "entity_id", "api-key-123", "resource", "gpt-4", "rf", int64(1_767_225_600_000), "shard_count", 1)
	u := store.Update{}
	conds := []store.Condition{store.Name(store.AttrPK).Exists()}
	var vals []store.Value
	value := func(v int64) store.Value {
		if template {
			vals = append(vals, store.Int(v))
			return store.Slot(len(vals) - 1)
		}
		return store.Int(v)
	}
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
	var e store.Expr
	if template {
		t, err := store.Compile(u, store.And(conds...))
		if err != nil {
			b.Fatal(err)
		}
		e = t.Expr(vals)
	} else {
		var err error
		if e, err = store.Build(u, store.And(conds...)); err != nil {
			b.Fatal(err)
		}
	}
	k, _ := store.DefaultSchema().KeyOf(it)
	return it, store.UpdateInput{Key: k, Expr: e, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true}
}

// BenchmarkConditionalUpdate measures the limiter's hot-path write on one
// item, partition ceilings on (the clock moves 1 ms per write, refilling
// exactly the 1 WCU it costs), through the string path (an Expr from
// store.Build, parsed and bound from its maps) and the structured path (an
// Expr from a store.Template, bound from its slot values). The Expr is made
// once: making it is the caller's work (see store's BenchmarkTemplateExpr).
func BenchmarkConditionalUpdate(b *testing.B) {
	for _, path := range []string{"string", "template"} {
		for _, bc := range []struct {
			name                  string
			stream, shared, views bool
		}{
			{"stream=on", true, false, false},
			{"stream=off", false, false, false},
			{"stream=on/shared", true, true, false},
			{"stream=off/shared", false, true, false},
			{"stream=on/views", true, false, true},
			{"stream=off/views", false, false, true},
		} {
			b.Run(path+"/"+bc.name, func(b *testing.B) {
				clk := memsim.NewManualClock(memsim.Epoch())
				s := memsim.New(memsim.WithClock(clk), memsim.WithStream(bc.stream), memsim.WithSharedResults(bc.shared),
					memsim.WithViews(bc.views))
				it, in := limiterWrite(b, path == "template")
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
}

func BenchmarkGet(b *testing.B) {
	s := memsim.New(memsim.WithPartitionLimits(0, 0))
	it, in := limiterWrite(b, false)
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
	it, _ := limiterWrite(b, false)
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
	it, _ := limiterWrite(b, false)
	b.ReportAllocs()
	var sink store.Item
	for b.Loop() {
		sink = maps.Clone(it)
	}
	_ = sink
}

// BenchmarkAlternatingTemplates is BenchmarkConditionalUpdate's structured
// path with the limiter's alternation: every write of the speculative
// acquire is followed by an adjust of two of its limits (another
// template, reading fewer attributes, one of them not read by the
// acquire), as a bucket sees acquires and adjusts in turn.
func BenchmarkAlternatingTemplates(b *testing.B) {
	clk := memsim.NewManualClock(memsim.Epoch())
	s := memsim.New(memsim.WithClock(clk), memsim.WithSharedResults(true))
	it, acquire := limiterWrite(b, true)
	it["adjusted"] = store.Int(0)
	mustPut(b, s, it)
	adj := store.MustCompile(store.Update{}.Add("b_tpm_tk", store.Slot(0)).Add("b_tpm_tc", store.Slot(1)).
		Add("b_otpm_tk", store.Slot(0)).Add("b_otpm_tc", store.Slot(1)).Add("adjusted", store.Slot(2)),
		store.Name("b_tpm_tc").GreaterThanEqual(store.Slot(3)))
	adjust := store.UpdateInput{Key: acquire.Key, Expr: adj.Expr([]store.Value{store.Int(10), store.Int(-10), store.Int(1), store.Int(10)}),
		Return: store.ReturnAllNew}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := range b.N {
		clk.Add(time.Millisecond)
		in := acquire
		if i%2 == 1 {
			in = adjust
		}
		if _, err := s.Update(ctx, in); err != nil {
			b.Fatalf("update %d: %v", i, err)
		}
		if i%64 == 63 {
			s.TrimStream(s.StreamLen())
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}
