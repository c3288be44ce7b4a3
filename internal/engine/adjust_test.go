package engine

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

// The Adjust machine: a correction (a charge, debt allowed) or a refund on
// the shard an acquire charged. It never refuses. Amounts are millitokens
// of rps10 (burst 10,000, 10 a ms); every case runs at T.
func TestAdjustPaths(t *testing.T) {
	ref := bucketRef
	p := plan1(ref)
	charge := p.WithAmounts(map[string]int64{"rps": 500})
	refund := p.WithAmounts(map[string]int64{"rps": -500})
	// Other configurations: rps doubled, or rps removed for tpm.
	faster := NewPlan(ref, []Limit{perSecond("rps", 20)}, nil)
	tpmOnly := NewPlan(ref, []Limit{perSecond("tpm", 10)}, nil)

	cases := []struct {
		name  string
		plan  *Plan
		turns []exchange
		check func(t *testing.T, a *Adjust, last Step, m *Memory)
	}{{
		name: "charge: the guarded ADD applies",
		plan: charge,
		turns: []exchange{
			{"update 0 adjust", wrote(shape{rf: T - 10, tk: map[string]int64{"rps": 7500}}.item(p))},
			{"done none", Result{}},
		},
		check: func(t *testing.T, a *Adjust, _ Step, m *Memory) {
			if img := m.View(ref, 0).Img; img == nil || a.Img != img || a.N != 1 {
				t.Fatalf("memory %p, machine %p at %d shards: want both the image the adjust returned, at 1", img, a.Img, a.N)
			}
		},
	}, {
		name:  "nothing to charge: done at once, no call",
		plan:  p.WithAmounts(nil),
		turns: []exchange{{"done none", Result{}}},
	}, {
		name: "charge on a full bucket: the fl guard fails; the normal write, no floor",
		plan: charge,
		turns: []exchange{
			{"update 0 adjust", failed(shape{rf: T - 5000}.item(p))},
			{"update 0 normal", wrote(shape{rf: T, tk: map[string]int64{"rps": 9500}}.item(p))},
			{"done none", Result{}},
		},
	}, {
		name: "refund of a limit the configuration removed: nothing to return to",
		plan: refund,
		turns: []exchange{
			{"update 0 adjust", failed(shape{rf: T - 10}.item(tpmOnly))},
			{"done none", Result{}},
		},
	}, {
		name: "charge after a configuration change: the limits the item still has, unguarded",
		plan: charge,
		turns: []exchange{
			{"update 0 adjust", failed(shape{rf: T - 5000}.item(faster))},
			{"update 0 adjust", Result{}},
		},
		check: func(t *testing.T, _ *Adjust, last Step, _ *Memory) {
			// The item is full: a guarded ADD would fail again.
			st := sim(t, shape{rf: T - 5000}.item(faster))
			if r := exec(t, st, last); r.Err != nil || attr(t, st, ref, 0, "b_rps_tk") != 19_500 {
				t.Fatalf("loose adjust: %v, tk %d; want applied, 20000-500", r.Err, attr(t, st, ref, 0, "b_rps_tk"))
			}
		},
	}, {
		name: "refund after expiry: nothing written, Vanished",
		plan: refund,
		turns: []exchange{
			{"update 0 adjust", gone},
			{"done none", Result{}},
		},
		check: func(t *testing.T, a *Adjust, _ Step, _ *Memory) {
			if !a.Vanished || a.Img != nil {
				t.Fatal("Vanished should say the refund found nothing to return to, and no image")
			}
		},
	}, {
		name: "charge after expiry: the shard made again, full less the charge",
		plan: charge,
		turns: []exchange{
			{"update 0 adjust", gone},
			{"put 0 create", Result{}},
			{"done none", Result{}},
		},
		check: func(t *testing.T, a *Adjust, _ Step, m *Memory) {
			if st, _ := m.View(ref, 0).Img.comp.Get("rps"); a.Vanished || st.Tokens != 9500 || st.TotalConsumed != 500 {
				t.Fatalf("vanished %v, remembered tk %d tc %d; want made with 500 charged", a.Vanished, st.Tokens, st.TotalConsumed)
			}
			if a.Img != m.View(ref, 0).Img {
				t.Fatal("the machine's image should be the item the create put")
			}
		},
	}, {
		name: "the Put lost to another creator: its item takes the normal write",
		plan: charge,
		turns: []exchange{
			{"update 0 adjust", gone},
			{"put 0 create", failed(shape{rf: T, tk: map[string]int64{"rps": 9000}}.item(p))},
			{"update 0 normal", Result{}},
		},
	}, {
		name: "the bucket doubled since the acquire: the normal write at 2 shards",
		plan: charge,
		turns: []exchange{
			{"update 0 adjust", failed(shape{n: 2, rf: T - 5000}.item(p))},
			{"update 0 normal", Result{}},
		},
		check: func(t *testing.T, a *Adjust, last Step, _ *Memory) {
			st := sim(t, shape{n: 2, rf: T - 5000}.item(p))
			if r := exec(t, st, last); a.n != 2 || r.Err != nil || attr(t, st, ref, 0, "b_rps_tk") != 4500 {
				t.Fatalf("n %d, write %v, tk %d; want 2 shards, 5000-500", a.n, r.Err, attr(t, st, ref, 0, "b_rps_tk"))
			}
		},
	}, {
		name:  "throttled: the throttle is the answer",
		plan:  charge,
		turns: []exchange{{"update 0 adjust", throttle}, {"err", Result{}}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemory(0)
			a := NewAdjust(m, tc.plan, 0, 1)
			last := converse(t, a.Start(T), a.Feed, T, tc.turns)
			if tc.check != nil {
				tc.check(t, a, last, m)
			}
		})
	}
}

// A lease is settled long after its acquire, and the shard has expired
// since (DynamoDB deleted it). A refund has nothing to return to: done,
// Vanished, nothing written. A charge applies to the bucket as it was when
// it expired, full: the shard is made again with the charge taken.
func TestAdjustStoryAfterTheShardExpired(t *testing.T) {
	p := plan1(bucketRef)
	st := sim(t)
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": -500}), 0, 1)
	play(t, st, a.Start(T), a.Feed, T, "update 0 adjust", "done none")
	if !a.Vanished || st.Peek(bucketRef.Key()) != nil {
		t.Fatalf("vanished %v, item %v; want Vanished and nothing written", a.Vanished, st.Peek(bucketRef.Key()))
	}

	a = NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": 500}), 0, 1)
	play(t, st, a.Start(T), a.Feed, T, "update 0 adjust", "put 0 create", "done none")
	if tk, tc := attr(t, st, bucketRef, 0, "b_rps_tk"), attr(t, st, bucketRef, 0, "b_rps_tc"); a.Vanished || tk != 9500 || tc != 500 {
		t.Fatalf("vanished %v, tk %d tc %d; want the shard made with 500 charged", a.Vanished, tk, tc)
	}
}

// The acquire charged shard 1 of 2; the whole bucket expired before the
// charge was corrected, and another client made shard 0 again at one
// shard. The adjust finds shard 1 gone and makes it: at 2 shards, empty
// less the charge, without reading shard 0. (A Charge reads shard 0 first
// and makes another shard only when shard 0's count includes it.) This
// test records what the adjust does today: the shard it makes stands
// beside a shard 0 of one shard.
func TestAdjustStoryChargeAfterExpiryOnAnotherShard(t *testing.T) {
	p := plan1(bucketRef)
	st := sim(t, shape{rf: T}.item(p)) // shard 0, one shard, made again
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": 500}), 1, 2)
	play(t, st, a.Start(T), a.Feed, T, "update 1 adjust", "put 1 create", "done none")
	if n, tk := attr(t, st, bucketRef, 1, "shard_count"), attr(t, st, bucketRef, 1, "b_rps_tk"); n != 2 || tk != -500 {
		t.Fatalf("shard 1 made at %d shards holding %d; today: 2 shards, -500", n, tk)
	}
}

// The acquire charged shard 0 when the bucket had one shard; it doubled
// since, and shard 0 expired while shard 1 lives (expiry deletes items one
// by one). The adjust finds shard 0 gone and makes it at its own count,
// one shard, full less the charge, beside shard 1 at two: it does not ask
// the index for the other shards first, as a Charge does
// (TestStoryShardZeroExpiredBesideItsSibling). This test records what the
// adjust does today.
func TestAdjustStoryShardZeroMadeWithoutDiscovery(t *testing.T) {
	p := plan1(bucketRef)
	st := sim(t, shape{shard: 1, n: 2, rf: T - 5000}.item(p))
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": 500}), 0, 1)
	play(t, st, a.Start(T), a.Feed, T, "update 0 adjust", "put 0 create", "done none")
	if n, tk := attr(t, st, bucketRef, 0, "shard_count"), attr(t, st, bucketRef, 0, "b_rps_tk"); n != 1 || tk != 9500 {
		t.Fatalf("shard 0 made at %d shards holding %d; today: 1 shard, 10000-500", n, tk)
	}
}

// The acquire charged shard 0 of 2; the bucket expired and was made again
// at one shard. The adjust's guarded ADD fails on the full shard 0 (its
// count is not the lease's), and it goes on at the count shard 0 shows:
// its normal write charges the bucket of one shard, and does not rescale
// it to the lease's stale two (a doubling no hot partition asked for).
func TestAdjustStoryStaleCountFollowsShardZero(t *testing.T) {
	p := plan1(bucketRef)
	st := sim(t, shape{rf: T - 5000}.item(p))
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": 500}), 0, 2)
	play(t, st, a.Start(T), a.Feed, T, "update 0 adjust", "update 0 normal", "done none")
	if n, tk := attr(t, st, bucketRef, 0, "shard_count"), attr(t, st, bucketRef, 0, "b_rps_tk"); n != 1 || tk != 9500 {
		t.Fatalf("shard 0 at %d shards holding %d; want 1 shard, 10000-500", n, tk)
	}
	if st, _ := a.Img.comp.Get("rps"); a.N != 1 || st.Tokens != 9500 {
		t.Fatalf("the machine says %d shards, tk %d; want the count and item of its last write, 1 and 9500", a.N, st.Tokens)
	}
}

// Under contention every write of the adjust fails with an item on which
// the next write must be made again. After the first write and 32 more,
// it gives up with an error rather than loop.
func TestAdjustStoryLostEveryRace(t *testing.T) {
	p := plan1(bucketRef)
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": 500}), 0, 1)
	s, calls := a.Start(T), 0
	for ; s.Call != nil; calls++ {
		s = a.Feed(failed(shape{rf: T - 5000}.item(p)), T)
	}
	if calls != 1+maxSlowAttempts || s.Err == nil || store.OutcomeUnknown(s.Err) {
		t.Fatalf("%d calls, then err %v; want %d calls, then an error (nothing applied)", calls, s.Err, 1+maxSlowAttempts)
	}
}
