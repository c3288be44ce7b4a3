package aggregator

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
	"github.com/shardlimit/limiter/store/storetest"
)

var allWindows = []keys.UsageWindow{keys.WindowHour, keys.WindowDay, keys.WindowMonth}

// workload writes bucket items the way the limiter does (creates, charges,
// refunds, limits removed and re-added, items deleted and recreated, new
// shards appearing lazily) over several hours and days, interleaved with
// other items, and returns the stream it produced.
type workload struct {
	st  *memsim.Store
	clk *memsim.ManualClock
	// clean[bucket limit] is false once the limit's history was cut (the
	// limit removed or the item deleted): its final tc no longer equals
	// everything it consumed.
	clean map[string]bool
	final map[string]int64 // bucket limit -> sum of final tc over shards
}

func bucketLimit(b keys.Bucket, limit string) string {
	return b.Namespace + "|" + b.Entity + "|" + b.Resource + "|" + limit
}

func runWorkload(t *testing.T, rng *rand.Rand, st *memsim.Store, clk *memsim.ManualClock, ops int) *workload {
	w := &workload{st: st, clk: clk, clean: map[string]bool{}, final: map[string]int64{}}
	limits := map[string]bucket.Limit{"rpm": perMinute(100), "tpm": perMinute(100_000), "a_b_c": perMinute(1000)}
	type bk struct {
		b     keys.Bucket
		count int64
	}
	var bs []bk
	for _, e := range []string{"e0", "user@x.io", "e:2"} {
		for _, r := range []string{"gpt-4", "gpt-4o", "m/x"} {
			bs = append(bs, bk{keys.Bucket{Namespace: "ns1", Entity: e, Resource: r}, []int64{1, 2, 4}[rng.IntN(3)]})
		}
	}
	bs = append(bs, bk{keys.Bucket{Namespace: "ns2", Entity: "e0", Resource: "gpt-4"}, 2})
	exists := map[string]bool{}
	removed := map[string]bool{} // the item lacks limit a_b_c
	amounts := func(pk string) map[string]int64 {
		m := map[string]int64{}
		for _, n := range sortedKeys(limits) {
			if n == "a_b_c" && removed[pk] {
				continue
			}
			if rng.IntN(10) < 7 {
				if a := rng.Int64N(52_000) - 2000; a != 0 {
					m[n] = a
				}
			}
		}
		return m
	}
	for i := 0; i < ops; i++ {
		clk.Add(time.Duration(1+rng.IntN(1200)) * time.Second)
		x := bs[rng.IntN(len(bs))]
		b := x.b.WithShard(rng.IntN(int(x.count)))
		switch k := rng.IntN(100); {
		case !exists[b.PK()]:
			tc := map[string]int64{}
			if b.Shard == 0 {
				tc = amounts(b.PK())
			}
			putBucket(t, st, bucketItem(b, x.count, clk.Now(), limits, tc))
			exists[b.PK()], removed[b.PK()] = true, false
		case k < 1: // TTL expiry
			if _, err := st.Delete(context.Background(), store.DeleteInput{Key: b.Key()}); err != nil {
				t.Fatal(err)
			}
			exists[b.PK()] = false
			for n := range limits {
				w.clean[bucketLimit(b, n)] = false
			}
		case k < 3 && !removed[b.PK()]: // a limit removed from the configuration (as a Normal write does)
			u := store.Update{}
			for _, f := range []string{"tk", "cp", "bx", "ra", "rp", "tc", "fl", "fh"} {
				u = u.Remove("b_a_b_c_" + f)
			}
			if _, err := st.Update(context.Background(), store.UpdateInput{Key: b.Key(), Expr: storetest.Build(t, u, store.Condition{})}); err != nil {
				t.Fatal(err)
			}
			removed[b.PK()] = true
			w.clean[bucketLimit(b, "a_b_c")] = false
		case k < 4: // and added again, with a charge (if_not_exists, as a Normal write does)
			l, c, now := limits["a_b_c"], 1+rng.Int64N(5000), clk.Now().UnixMilli()
			u := store.Update{}.SetIfNotExistsPlus("b_a_b_c_tk", store.Int(l.Burst), store.Int(-c)).
				SetIfNotExists("b_a_b_c_cp", store.Int(l.Capacity)).SetIfNotExists("b_a_b_c_bx", store.Int(l.Burst)).
				SetIfNotExists("b_a_b_c_ra", store.Int(l.RefillAmount)).SetIfNotExists("b_a_b_c_rp", store.Int(l.RefillPeriod)).
				SetIfNotExists("b_a_b_c_fl", store.Int(now)).SetIfNotExists("b_a_b_c_fh", store.Int(now)).
				Add("b_a_b_c_tc", store.Int(c))
			if _, err := st.Update(context.Background(), store.UpdateInput{Key: b.Key(), Expr: storetest.Build(t, u, store.Condition{})}); err != nil {
				t.Fatal(err)
			}
			removed[b.PK()] = false
		case k < 8: // other items
			if _, err := st.Put(context.Background(), store.PutInput{Item: store.Item{
				store.AttrPK: store.Str(keys.EntityPK(b.Namespace, b.Entity)), store.AttrSK: store.Str(keys.SKEntity),
				"parent_id": store.Str(fmt.Sprint("p", i)),
			}}); err != nil {
				t.Fatal(err)
			}
		default:
			charge(t, st, b, amounts(b.PK()))
		}
	}
	for _, it := range st.Items() {
		pk, _ := it.Str(store.AttrPK)
		b, ok := keys.ParseBucketPK(pk)
		if !ok {
			continue
		}
		for name, v := range it {
			if l, f, ok := bucket.ParseAttrName(name); ok && f == bucket.FieldTotalConsumed && l != keys.HiddenLimit {
				n, _ := v.AsInt()
				w.final[bucketLimit(b.WithShard(0), l)] += n
			}
		}
	}
	return w
}

// oracle computes the expected snapshots straight from the stream: per
// record of a bucket item, new tc minus old tc of every limit but wcu.
func oracle(recs []memsim.Record, windows []keys.UsageWindow) map[snapKey]snapVal {
	want := map[snapKey]snapVal{}
	for _, r := range recs {
		b, ok := keys.ParseBucketPK(r.Keys.PK)
		if !ok || r.New == nil {
			continue
		}
		for name, v := range r.New {
			l, f, ok := bucket.ParseAttrName(name)
			if !ok || f != bucket.FieldTotalConsumed || l == keys.HiddenLimit {
				continue
			}
			nv, _ := v.AsInt()
			ov, _ := r.Old.Int(name)
			if nv == ov {
				continue
			}
			for _, w := range windows {
				k := snapKey{b.Namespace, b.Entity, b.Resource, l, w, w.Start(r.At).UnixMilli()}
				s := want[k]
				s.consumed += nv - ov
				s.events++
				want[k] = s
			}
		}
	}
	return want
}

// TestSnapshotsUnderAtLeastOnceDelivery runs a workload, then delivers its
// stream in batches that interleave items at random, repeat earlier
// records, and fail (throttles, 5xx before and after applying, lost
// answers) on a tenth of the snapshot writes; failed records are delivered
// again either Lambda's way (the rest of the batch from the first failure)
// or alone. Two processors share the work. At the end the snapshots must
// equal the sums of the tc changes exactly, and each limit's snapshots
// must add up to its final tc.
func TestSnapshotsUnderAtLeastOnceDelivery(t *testing.T) {
	seeds := 24
	if testing.Short() {
		seeds = 6
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		lambdaMode := seed%2 == 0
		t.Run(fmt.Sprintf("seed%d/lambda=%v", seed, lambdaMode), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			faults := false
			frng := rand.New(rand.NewPCG(seed, 7))
			inj := memsim.Func("usage-faults", func(op memsim.Op) memsim.Decision {
				if !faults || op.Kind != memsim.OpUpdate || !strings.Contains(op.Keys[0].PK, "/USAGE#") || frng.IntN(10) != 0 {
					return memsim.Decision{}
				}
				return memsim.Decision{Fault: []memsim.Fault{memsim.FaultThrottle, memsim.Fault5xxBeforeApply,
					memsim.Fault5xxAfterApply, memsim.FaultLostResponse}[frng.IntN(4)]}
			})
			st, clk := newStore(time.Date(2026, 1, 30, 21, 0, 0, 0, time.UTC), memsim.WithFaults(inj))
			w := runWorkload(t, rng, st, clk, 700)
			stream := st.Stream(0)
			recs := fromMemsim(stream)

			opts := Options{Logger: quiet, Windows: []Window{Monthly, Hourly, Daily}, HotPercent: -1}
			procs := []*Processor{newProcessor(t, st, opts), newProcessor(t, st, opts)}
			queues := map[string][]Record{}
			var order []string // items, in order of first record
			for _, r := range recs {
				if _, ok := queues[r.Keys.PK]; !ok {
					order = append(order, r.Keys.PK)
				}
				queues[r.Keys.PK] = append(queues[r.Keys.PK], r)
			}
			pending := func() []string {
				var ks []string
				for _, k := range order {
					if len(queues[k]) > 0 {
						ks = append(ks, k)
					}
				}
				return ks
			}
			var seen []Record
			var total Stats
			faults = true
			for rounds := 0; ; rounds++ {
				if rounds > 100_000 {
					t.Fatal("delivery does not converge")
				}
				ks := pending()
				if len(ks) == 0 {
					break
				}
				var batch []Record
				var original []bool
				for n := 1 + rng.IntN(25); n > 0; n-- {
					if len(seen) > 0 && rng.IntN(7) == 0 {
						batch = append(batch, seen[rng.IntN(len(seen))]) // a duplicate, from any time
						original = append(original, false)
						continue
					}
					if ks = pending(); len(ks) == 0 {
						break
					}
					k := ks[rng.IntN(len(ks))]
					for m := 1 + rng.IntN(3); m > 0 && len(queues[k]) > 0; m-- {
						batch = append(batch, queues[k][0])
						original = append(original, true)
						queues[k] = queues[k][1:]
					}
				}
				res := procs[rng.IntN(2)].Process(context.Background(), batch)
				addStats(&total, res.Stats)
				// What was processed without failure may come again at any
				// time. What failed must come again before any later record
				// of its item: Lambda retries from the first failure, in
				// order; a deliverer that broke this rule would lose counts
				// (see docs/aggregator.md).
				failed := map[int]bool{}
				for _, f := range res.Failures {
					failed[f.Index] = true
				}
				for i, r := range batch {
					if !failed[i] {
						seen = append(seen, r)
					}
				}
				if len(res.Failures) == 0 {
					continue
				}
				for _, f := range res.Failures {
					if f.Malformed() {
						t.Fatalf("record %s malformed: %v", f.SequenceNumber, f.Err)
					}
				}
				redo := map[int]bool{}
				if lambdaMode { // everything from the first failure on
					for i := res.Failures[0].Index; i < len(batch); i++ {
						redo[i] = true
					}
				} else {
					for _, f := range res.Failures {
						redo[f.Index] = true
					}
				}
				// Back to the head of their items' queues, in order.
				for i := len(batch) - 1; i >= 0; i-- {
					if redo[i] && original[i] {
						k := batch[i].Keys.PK
						queues[k] = append([]Record{batch[i]}, queues[k]...)
					}
				}
			}
			faults = false
			if total.Duplicates+total.AlreadyApplied == 0 {
				t.Errorf("no redelivery was exercised: %+v", total)
			}

			got := readSnapshots(st.Items())
			want := oracle(stream, allWindows)
			if !reflect.DeepEqual(got, want) {
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%+v: got %+v, want %+v", k, got[k], v)
					}
				}
				for k, v := range got {
					if _, ok := want[k]; !ok {
						t.Errorf("%+v: got %+v, want nothing", k, v)
					}
				}
				t.FailNow()
			}
			// Every limit whose history is whole: its hourly snapshots add up
			// to its final tc.
			hourly := map[string]int64{}
			for k, v := range got {
				if k.window == keys.WindowHour {
					hourly[bucketLimit(keys.Bucket{Namespace: k.ns, Entity: k.entity, Resource: k.resource}, k.limit)] += v.consumed
				}
			}
			checked := 0
			for bl, tc := range w.final {
				if c, ok := w.clean[bl]; ok && !c {
					continue
				}
				if sum := hourly[bl]; sum != tc {
					t.Errorf("%s: hourly snapshots add up to %d, final tc is %d", bl, sum, tc)
				}
				checked++
			}
			if checked == 0 {
				t.Error("no limit kept its whole history")
			}

			// The aggregator's own writes come back on the stream: ignored.
			own := fromMemsim(st.Stream(stream[len(stream)-1].Seq))
			before := st.StreamLen()
			res := procs[0].Process(context.Background(), own)
			if len(own) == 0 || res.Stats.Ignored != len(own) || st.StreamLen() != before {
				t.Errorf("own records: %d, stats %+v, wrote %d", len(own), res.Stats, st.StreamLen()-before)
			}
		})
	}
}

func addStats(a *Stats, b Stats) {
	a.Records += b.Records
	a.Ignored += b.Ignored
	a.Duplicates += b.Duplicates
	a.Deltas += b.Deltas
	a.SnapshotWrites += b.SnapshotWrites
	a.AlreadyApplied += b.AlreadyApplied
	a.Doublings += b.Doublings
	a.DoublingsLost += b.DoublingsLost
	a.Propagated += b.Propagated
	a.Consumed = a.Consumed.Add(b.Consumed)
}

// The same batch on the same store state gives the same writes, byte for
// byte, whatever the batch's order across items.
func TestProcessIsDeterministic(t *testing.T) {
	run := func(shuffle uint64) ([]store.Item, []memsim.Record) {
		rng := rand.New(rand.NewPCG(5, 5))
		st, clk := newStore(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
		runWorkload(t, rng, st, clk, 300)
		recs := fromMemsim(st.Stream(0))
		n := st.StreamLen()
		// Shuffle across items, keeping each item's order.
		srng := rand.New(rand.NewPCG(shuffle, 1))
		byItem := map[string][]Record{}
		var pks []string
		for _, r := range recs {
			if byItem[r.Keys.PK] == nil {
				pks = append(pks, r.Keys.PK)
			}
			byItem[r.Keys.PK] = append(byItem[r.Keys.PK], r)
		}
		var mixed []Record
		for len(pks) > 0 {
			i := srng.IntN(len(pks))
			mixed = append(mixed, byItem[pks[i]][0])
			if byItem[pks[i]] = byItem[pks[i]][1:]; len(byItem[pks[i]]) == 0 {
				pks = append(pks[:i], pks[i+1:]...)
			}
		}
		p := newProcessor(t, st, Options{Logger: quiet})
		if res := p.Process(context.Background(), mixed); len(res.Failures) != 0 {
			t.Fatal(res.Failures)
		}
		return st.Items(), st.Stream(n)
	}
	items1, stream1 := run(1)
	items2, stream2 := run(2)
	if !reflect.DeepEqual(items1, items2) || !reflect.DeepEqual(stream1, stream2) {
		t.Error("the same batch content gave different writes")
	}
}

// hotBucket creates a bucket item, then writes it as a run of writes that
// consumed used write units (millitokens) would: wcu tc up by used, rf at
// rf. The stored wcu balance is left near full, as full writes leave it:
// the aggregator must judge from the consumption, not from the balance.
func hotBucket(t *testing.T, st *memsim.Store, b keys.Bucket, count int64, at time.Time, used, rf int64,
	limits map[string]bucket.Limit) {
	t.Helper()
	putBucket(t, st, bucketItem(b, count, at, limits, nil))
	consume(t, st, b, used, rf)
}

// consume adds used write units (millitokens) to a bucket item's wcu tc
// and sets its rf, in one write.
func consume(t *testing.T, st *memsim.Store, b keys.Bucket, used, rf int64) {
	t.Helper()
	tc, _ := st.Peek(b.Key()).Int(bucket.AttrName(keys.HiddenLimit, bucket.FieldTotalConsumed))
	set(t, st, b.Key(), map[string]int64{"b_wcu_tk": 999_000, "b_wcu_tc": tc + used, bucket.AttrRefill: rf})
}

var rpmOnly = map[string]bucket.Limit{"rpm": perMinute(6000)}

func TestProactiveDoublingHappensOnce(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "hot", Resource: "gpt-4"}
	count := func(st *memsim.Store, shard int) int64 {
		n, _ := st.Peek(b.WithShard(shard).Key()).Int(keys.AttrShardCount)
		return n
	}

	// The same record twice, to one processor and to two.
	st, _ := newStore(t0)
	hotBucket(t, st, b, 1, t0, 900_000, t0.UnixMilli(), rpmOnly) // 900 units at once: hot
	recs := fromMemsim(st.Stream(0))
	p1, p2 := newProcessor(t, st, Options{Logger: quiet}), newProcessor(t, st, Options{Logger: quiet})
	r1 := p1.Process(ctx, recs)
	r2 := p1.Process(ctx, recs)
	r3 := p2.Process(ctx, recs)
	if r1.Stats.Doublings != 1 || r2.Stats.Doublings+r2.Stats.DoublingsLost != 0 ||
		r3.Stats.Doublings != 0 || r3.Stats.DoublingsLost != 1 || count(st, 0) != 2 {
		t.Fatalf("doublings %d/%d/%d (lost %d/%d/%d), count %d; want one doubling to 2",
			r1.Stats.Doublings, r2.Stats.Doublings, r3.Stats.Doublings,
			r1.Stats.DoublingsLost, r2.Stats.DoublingsLost, r3.Stats.DoublingsLost, count(st, 0))
	}
	if len(r1.Failures)+len(r2.Failures)+len(r3.Failures) != 0 {
		t.Fatal("failures")
	}

	// The doubling's own record charges nothing more: within the cooldown
	// it changes nothing, for this processor or a fresh one.
	dbl := fromMemsim(st.Stream(uint64(len(recs))))
	if len(dbl) != 1 || dbl[0].EventName != EventModify {
		t.Fatalf("doubling record %+v", dbl)
	}
	for _, p := range []*Processor{p1, newProcessor(t, st, Options{Logger: quiet})} {
		if res := p.Process(ctx, dbl); res.Stats.Doublings != 0 || count(st, 0) != 2 {
			t.Fatalf("doubled again inside the cooldown: %+v", res.Stats)
		}
	}
	// Redelivered whole to a fresh processor: the hot record is stale (a
	// later record of the batch shows 2 shards), so no write is even tried.
	all := fromMemsim(st.Stream(0))
	if res := newProcessor(t, st, Options{Logger: quiet}).Process(ctx, all); res.Stats.Doublings+res.Stats.DoublingsLost != 0 {
		t.Fatalf("stale record tried to double: %+v", res.Stats)
	}
	// Still hot once the cooldown has passed: the next level.
	later := t0.Add(DefaultShardCooldown + time.Second)
	n := st.StreamLen()
	st.Clock().(*memsim.ManualClock).Set(later)
	consume(t, st, b, 950_000, later.UnixMilli())
	if res := p1.Process(ctx, fromMemsim(st.Stream(n))); res.Stats.Doublings != 1 || count(st, 0) != 4 {
		t.Fatalf("after the cooldown: %+v, count %d", res.Stats, count(st, 0))
	}

	// Two processors racing on the same record: one doubling.
	st, _ = newStore(t0)
	hotBucket(t, st, b, 1, t0, 1_000_000, t0.UnixMilli(), rpmOnly)
	recs = fromMemsim(st.Stream(0))
	q1, q2 := newProcessor(t, st, Options{Logger: quiet}), newProcessor(t, st, Options{Logger: quiet})
	a, c := q1.Process(ctx, recs), q2.Process(ctx, recs)
	if a.Stats.Doublings+c.Stats.Doublings != 1 || a.Stats.DoublingsLost+c.Stats.DoublingsLost != 1 || count(st, 0) != 2 {
		t.Fatalf("race: %+v %+v, count %d", a.Stats, c.Stats, count(st, 0))
	}
}

// A doubling halves every shard's per-shard burst and rate while the
// tokens stay, so the full-at guards (fl, fh) stored at the old count no
// longer bound the instant a shard is full: a consumption-only write could
// take from a full bucket. The aggregator's doubling of shard 0 and its
// propagation to the other shards reset them (fl 0, fh the largest
// int64), so each shard's next charge is a normal write under the rf
// lock. A shard written under other limits than shard 0's (its limits
// hash differs) is left to its clients, which rescale it.
func TestDoublingAndPropagationResetTheGuards(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "hot", Resource: "gpt-4"}
	st, _ := newStore(t0)
	for s := 1; s < 4; s++ {
		putBucket(t, st, bucketItem(b.WithShard(s), 4, t0, rpmOnly, nil))
	}
	set(t, st, b.WithShard(3).Key(), map[string]int64{keys.AttrLimitsHash: 777}) // another configuration
	n := st.StreamLen()
	hotBucket(t, st, b, 4, t0, 900_000, t0.UnixMilli(), rpmOnly)
	p := newProcessor(t, st, Options{Logger: quiet})
	if res := p.Process(ctx, fromMemsim(st.Stream(n))); len(res.Failures) != 0 || res.Stats.Doublings != 1 {
		t.Fatalf("%+v %+v: want one doubling", res.Failures, res.Stats)
	}
	// The doubling's own record propagates it.
	n = st.StreamLen() - 1
	if res := p.Process(ctx, fromMemsim(st.Stream(n))); len(res.Failures) != 0 || res.Stats.Propagated != 2 {
		t.Fatalf("%+v %+v: want the count propagated to shards 1 and 2", res.Failures, res.Stats)
	}
	for s, want := range []int64{8, 8, 8, 4} {
		it := st.Peek(b.WithShard(s).Key())
		count, _ := it.Int(keys.AttrShardCount)
		fl, _ := it.Int("b_rpm_" + keys.FieldFullLo)
		fh, _ := it.Int("b_rpm_" + keys.FieldFullHi)
		wcuFl, _ := it.Int("b_wcu_" + keys.FieldFullLo)
		reset := fl == 0 && fh == math.MaxInt64
		if count != want || reset != (want == 8) || wcuFl != t0.UnixMilli() {
			t.Errorf("shard %d: count %d, rpm guards [%d, %d], wcu fl %d; want count %d, guards reset %v, wcu's untouched",
				s, count, fl, fh, wcuFl, want, want == 8)
		}
	}
}

func TestProactiveDoublingThreshold(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	ms := t0.UnixMilli()
	for _, tc := range []struct {
		name     string
		count    int64
		shard    int
		used, rf int64
		at       time.Time // the records' time; zero: none
		limits   map[string]bucket.Limit
		opts     Options
		want     int64
	}{
		{name: "over 80% of the window's capacity", count: 1, used: 800_001, rf: ms, at: t0, want: 2},
		{name: "at 80%", count: 1, used: 800_000, rf: ms, at: t0, want: 1},
		{name: "no record time: rf stands in", count: 2, used: 990_000, rf: ms, want: 4},
		{name: "custom threshold", count: 1, used: 500_001, rf: ms, at: t0, opts: Options{HotPercent: 50}, want: 2},
		{name: "disabled", count: 1, used: 1_000_000, rf: ms, at: t0, opts: Options{HotPercent: -1}, want: 1},
		{name: "at the shard ceiling", count: 256, used: 1_000_000, rf: ms, at: t0, want: 256},
		{name: "custom ceiling", count: 8, used: 1_000_000, rf: ms, at: t0, opts: Options{MaxShards: 8}, want: 8},
		{name: "up to the custom ceiling", count: 4, used: 1_000_000, rf: ms, at: t0, opts: Options{MaxShards: 8}, want: 8},
		{name: "a limit that splits into one token a shard", count: 1, used: 1_000_000, rf: ms, at: t0,
			limits: map[string]bucket.Limit{"rpm": perMinute(2)}, want: 2},
		{name: "a limit too small to split", count: 2, used: 1_000_000, rf: ms, at: t0,
			limits: map[string]bucket.Limit{"rpm": perMinute(3), "big": perMinute(1000)}, want: 2},
		{name: "not shard 0", count: 2, shard: 1, used: 1_000_000, rf: ms, at: t0, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := newStore(t0)
			b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
			limits := tc.limits
			if limits == nil {
				limits = rpmOnly
			}
			if tc.shard != 0 {
				putBucket(t, st, bucketItem(b, tc.count, t0, limits, nil))
			}
			hotBucket(t, st, b.WithShard(tc.shard), tc.count, t0, tc.used, tc.rf, limits)
			recs := fromMemsim(st.Stream(0))
			for i := range recs {
				recs[i].At = tc.at
			}
			opts := tc.opts
			opts.Logger = quiet
			if res := newProcessor(t, st, opts).Process(context.Background(), recs); len(res.Failures) != 0 {
				t.Fatal(res.Failures)
			}
			if n, _ := st.Peek(b.Key()).Int(keys.AttrShardCount); n != tc.want {
				t.Errorf("shard count %d, want %d", n, tc.want)
			}
		})
	}
}

// The meter sums the write units of the last MeterWindow by record time
// (rf when later): hot above 80 % of what wcu refills in that window (800
// units in a second). A redelivered record is not counted twice.
func TestProactiveDoublingMeter(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	run := func(gap time.Duration, redeliver bool) int64 {
		st, _ := newStore(t0)
		putBucket(t, st, bucketItem(b, 1, t0, rpmOnly, nil))
		consume(t, st, b, 600_000, t0.UnixMilli())
		p := newProcessor(t, st, Options{Logger: quiet})
		first := fromMemsim(st.Stream(0))
		p.Process(context.Background(), first)
		if redeliver {
			p.Process(context.Background(), first)
		}
		if c, _ := st.Peek(b.Key()).Int(keys.AttrShardCount); c != 1 {
			t.Fatalf("600 units in a window doubled (count %d)", c)
		}
		n := st.StreamLen()
		later := t0.Add(gap)
		consume(t, st, b, 300_000, later.UnixMilli())
		recs := fromMemsim(st.Stream(n))
		for i := range recs {
			recs[i].At = later
		}
		if res := p.Process(context.Background(), recs); len(res.Failures) != 0 {
			t.Fatal(res.Failures)
		}
		c, _ := st.Peek(b.Key()).Int(keys.AttrShardCount)
		return c
	}
	if c := run(100*time.Millisecond, false); c != 2 {
		t.Errorf("900 units within 100 ms: count %d, want 2", c)
	}
	if c := run(1100*time.Millisecond, false); c != 1 {
		t.Errorf("600 units, then 300 units 1.1 s later: count %d, want 1", c)
	}
	if c := run(1100*time.Millisecond, true); c != 1 {
		t.Errorf("redelivered record counted twice: count %d, want 1", c)
	}
	if c := run(2250*time.Millisecond, false); c != 1 {
		t.Errorf("600 units, then 300 units 2.25 s later (another slot of the meter): count %d, want 1", c)
	}
}

// Records with whole-second times (Lambda) are judged over a whole second,
// sub-second ones over half a second: 500 write units are hot in 500 ms
// (above 400), not in a second (800).
func TestProactiveDoublingWindowFollowsTimePrecision(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	for _, tc := range []struct {
		name string
		at   time.Time
		want int64
	}{
		{"whole seconds", t0.Add(3 * time.Second), 1},
		{"milliseconds", t0.Add(3*time.Second + 7*time.Millisecond), 2},
	} {
		st, _ := newStore(t0)
		putBucket(t, st, bucketItem(b, 1, t0, rpmOnly, nil))
		n := st.StreamLen()
		consume(t, st, b, 500_000, t0.UnixMilli())
		recs := fromMemsim(st.Stream(n))
		for i := range recs {
			recs[i].At = tc.at
		}
		p := newProcessor(t, st, Options{Logger: quiet})
		if res := p.Process(context.Background(), recs); len(res.Failures) != 0 {
			t.Fatal(res.Failures)
		}
		if c, _ := st.Peek(b.Key()).Int(keys.AttrShardCount); c != tc.want {
			t.Errorf("%s: count %d, want %d", tc.name, c, tc.want)
		}
	}
}

func TestPropagation(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	st, _ := newStore(t0)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "gpt-4"}
	for s := 0; s < 4; s++ {
		putBucket(t, st, bucketItem(b.WithShard(s), 4, t0, rpmOnly, nil))
	}
	set(t, st, b.WithShard(2).Key(), map[string]int64{keys.AttrShardCount: 8}) // learned it already
	others := []keys.Bucket{
		{Namespace: "ns", Entity: "e", Resource: "gpt-4o", Shard: 1}, // a resource the prefix must not catch
		{Namespace: "ns", Entity: "e2", Resource: "gpt-4", Shard: 1}, // another entity
		{Namespace: "ns2", Entity: "e", Resource: "gpt-4", Shard: 1}, // another namespace
	}
	for _, o := range others {
		putBucket(t, st, bucketItem(o, 4, t0, rpmOnly, nil))
	}
	n := st.StreamLen()
	if _, err := st.Update(ctx, keys.DoubleShards(b, 4, keys.LimitsOf(st.Peek(b.Key())))); err != nil {
		t.Fatal(err)
	}
	recs := fromMemsim(st.Stream(n))
	p := newProcessor(t, st, Options{Logger: quiet})
	res := p.Process(ctx, recs)
	if len(res.Failures) != 0 || res.Stats.Propagated != 2 {
		t.Fatalf("%+v %+v", res.Failures, res.Stats)
	}
	for s, want := range []int64{8, 8, 8, 8} {
		if got, _ := st.Peek(b.WithShard(s).Key()).Int(keys.AttrShardCount); got != want {
			t.Errorf("shard %d: count %d, want %d", s, got, want)
		}
	}
	for _, o := range others {
		if got, _ := st.Peek(o.Key()).Int(keys.AttrShardCount); got != 4 {
			t.Errorf("%s: count %d, want 4 (untouched)", o.PK(), got)
		}
	}
	// Redelivered: nothing to do; the propagation writes themselves are
	// records of other shards, which change nothing.
	m := st.StreamLen()
	if res := newProcessor(t, st, Options{Logger: quiet}).Process(ctx, fromMemsim(st.Stream(n))); res.Stats.Propagated != 0 ||
		len(res.Failures) != 0 || st.StreamLen() != m {
		t.Errorf("redelivery: %+v, %d writes", res.Stats, st.StreamLen()-m)
	}
	// Shard 0 recreated (after expiry) with a count above the others'.
	if _, err := st.Delete(ctx, store.DeleteInput{Key: b.Key()}); err != nil {
		t.Fatal(err)
	}
	m = st.StreamLen()
	putBucket(t, st, bucketItem(b, 16, t0, rpmOnly, nil))
	if res := p.Process(ctx, fromMemsim(st.Stream(m))); res.Stats.Propagated != 3 {
		t.Errorf("INSERT of shard 0 with 16 shards: %+v", res.Stats)
	}
}

func TestPropagationFailureIsReported(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	b := keys.Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	fail, fault := true, memsim.Fault5xxBeforeApply
	st, _ := newStore(t0, memsim.WithFaults(memsim.Func("shard-1", func(op memsim.Op) memsim.Decision {
		if fail && op.Kind == memsim.OpUpdate && op.Keys[0] == b.WithShard(1).Key() {
			return memsim.Decision{Fault: fault}
		}
		return memsim.Decision{}
	})))
	putBucket(t, st, bucketItem(b, 2, t0, rpmOnly, nil))
	putBucket(t, st, bucketItem(b.WithShard(1), 2, t0, rpmOnly, nil))
	n := st.StreamLen()
	if _, err := st.Update(ctx, keys.DoubleShards(b, 2, keys.LimitsOf(st.Peek(b.Key())))); err != nil {
		t.Fatal(err)
	}
	recs := fromMemsim(st.Stream(n))
	p := newProcessor(t, st, Options{Logger: quiet})
	res := p.Process(ctx, recs)
	if len(res.Failures) != 1 || res.Failures[0].Malformed() || res.Failures[0].SequenceNumber != recs[0].SequenceNumber {
		t.Fatalf("failures %+v", res.Failures)
	}
	fail = false
	if res := p.Process(ctx, recs); len(res.Failures) != 0 || res.Stats.Propagated != 1 {
		t.Fatalf("retry: %+v %+v", res.Failures, res.Stats)
	}

	// A throttled propagation is skipped, not failed: the shard is hot, and
	// failing the record would hold back shard 0's later records.
	fail, fault = true, memsim.FaultThrottle
	n = st.StreamLen()
	if _, err := st.Update(ctx, keys.DoubleShards(b, 4, keys.LimitsOf(st.Peek(b.Key())))); err != nil {
		t.Fatal(err)
	}
	if res := p.Process(ctx, fromMemsim(st.Stream(n))); len(res.Failures) != 0 || res.Stats.PropagationsThrottled != 1 {
		t.Fatalf("throttled propagation: %+v %+v", res.Failures, res.Stats)
	}
}

func TestNamespacesAndOtherItems(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	st, _ := newStore(t0)
	tc := map[string]int64{"rpm": 5000}
	putBucket(t, st, bucketItem(keys.Bucket{Namespace: "a", Entity: "e", Resource: "r"}, 1, t0, rpmOnly, tc))
	putBucket(t, st, bucketItem(keys.Bucket{Namespace: "b", Entity: "e", Resource: "r"}, 1, t0, rpmOnly, tc))
	for _, k := range []store.Key{keys.Entity("a", "e"), keys.EntityLimits("a", "e", "r"), keys.ResourceLimits("a", "r"), keys.Schema(),
		{PK: "a/BUCKET#e#r#0", SK: "#OTHER"}} {
		if _, err := st.Put(context.Background(), store.PutInput{Item: store.Item{store.AttrPK: store.Str(k.PK),
			store.AttrSK: store.Str(k.SK), "b_rpm_tc": store.Int(99)}}); err != nil {
			t.Fatal(err)
		}
	}
	res := newProcessor(t, st, Options{Logger: quiet, Namespaces: []string{"a"}}).Process(context.Background(), fromMemsim(st.Stream(0)))
	if res.Stats.Ignored != 6 || res.Stats.Deltas != 1 || len(res.Failures) != 0 {
		t.Fatalf("%+v %+v", res.Stats, res.Failures)
	}
	got := readSnapshots(st.Items())
	if len(got) != 2 || got[snapKey{"a", "e", "r", "rpm", keys.WindowHour, t0.UnixMilli()}] != (snapVal{5000, 1}) {
		t.Errorf("snapshots %v", got)
	}
}

func TestDuplicatesInOneBatch(t *testing.T) {
	t0 := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	st, _ := newStore(t0)
	b := keys.Bucket{Namespace: "a", Entity: "e", Resource: "r"}
	putBucket(t, st, bucketItem(b, 1, t0, rpmOnly, map[string]int64{"rpm": 1000}))
	charge(t, st, b, map[string]int64{"rpm": 2000})
	recs := fromMemsim(st.Stream(0))
	batch := []Record{recs[1], recs[0], recs[1], recs[0], recs[1]}
	res := newProcessor(t, st, Options{Logger: quiet}).Process(context.Background(), batch)
	if res.Stats.Duplicates != 3 || res.Stats.Deltas != 2 || res.Stats.SnapshotWrites != 2 || len(res.Failures) != 0 {
		t.Fatalf("%+v", res.Stats)
	}
	if got := readSnapshots(st.Items())[snapKey{"a", "e", "r", "rpm", keys.WindowDay, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC).UnixMilli()}]; got != (snapVal{3000, 2}) {
		t.Errorf("daily %+v", got)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	st, _ := newStore(memsim.Epoch())
	for _, o := range []Options{
		{Windows: []Window{Hourly, Hourly}},
		{Windows: []Window{9}},
		{HotPercent: 101},
		{MaxShards: -1},
		{Namespaces: []string{""}},
		{Retention: map[Window]time.Duration{Hourly: 24 * time.Hour}},
	} {
		if _, err := New(st, o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New(nil) accepted")
	}
}
