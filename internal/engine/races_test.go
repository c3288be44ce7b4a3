package engine

import (
	"context"
	"reflect"
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Stories of the Charge machine: clients racing for one bucket, stale
// knowledge, expiry, promises. Where the bucket's contents matter, the
// store is memsim and each story makes the calls itself, in the order it
// tells, so that the interleaving is the story's, not the scheduler's.
// Amounts are millitokens of rps10 (burst 10,000, 10 a ms).

// Two clients hold the same image of a full bucket and both send the full
// write in the same millisecond. A's lands; B's fails and returns A's item,
// which is below its burst with 9 tokens stored: B charges consume-only
// (retry), without contending for the rf lock. The bucket ends with
// exactly the two charges, and its write units count all three writes.
func TestStoryTwoFullWritesFromOneImage(t *testing.T) {
	p := plan1(bucketRef)
	full := shape{rf: T - 5000}.item(p)
	st := sim(t, full)
	ma, mb := NewMemory(0), NewMemory(0)
	knows(t, ma, bucketRef, full, 1, T-5000)
	knows(t, mb, bucketRef, full, 1, T-5000)
	a, b := NewCharge(ma, p, picks(), Options{}), NewCharge(mb, p, picks(), Options{})

	sa, sb := a.Start(T), b.Start(T)
	play(t, st, sa, a.Feed, T, "update 0 full", "done full")
	sb = play(t, st, sb, b.Feed, T, "update 0 full", "update 0 retry") // A's item came back
	play(t, st, sb, b.Feed, T, "update 0 retry", "done retry")

	if tk, tc := attr(t, st, bucketRef, 0, "b_rps_tk"), attr(t, st, bucketRef, 0, "b_rps_tc"); tk != 8000 || tc != 2000 {
		t.Fatalf("tk %d tc %d, want 8000 and 2000: the burst less exactly the two charges", tk, tc)
	}
	if w := attr(t, st, bucketRef, 0, "b_wcu_tc"); w != 3000 {
		t.Fatalf("wcu_tc %d, want 3000: A's write, B's failed one and B's retry", w)
	}
}

// Writers share a bucket far below its limit. B's image says it is nearly
// full, and the others wrote since, so B sends the speculative write; the
// bucket is full (the fl guard fails) and the failed write returns it. B
// lost a race, so its full write takes the cushion: rf dated 10 ms ahead,
// 10 ms of refill (100) paid. C, right after, finds the bucket below its
// burst and charges it with the consumption-only write: no lock, no race.
func TestStoryCushionAfterFindingASharedBucketFull(t *testing.T) {
	p := plan1(bucketRef)
	st := sim(t, shape{rf: T - 5000}.item(p))
	mb := speculating(NewMemory(0))
	knows(t, mb, bucketRef, shape{rf: T - 100, tk: map[string]int64{"rps": 9000}}.item(p), 1, T-100)
	measured(mb, bucketRef, 0, 0.06, 0.05, T-100, nil) // 5 writes by others since the image
	b := NewCharge(mb, p, picks(), Options{})

	play(t, st, b.Start(T), b.Feed, T, "update 0 speculative", "update 0 full", "done full")
	if rf, tk := attr(t, st, bucketRef, 0, "rf"), attr(t, st, bucketRef, 0, "b_rps_tk"); rf != T+10 || tk != 8900 {
		t.Fatalf("rf T%+d, tk %d; want T+10 and 10000-1000-100", rf-T, tk)
	}

	c := NewCharge(speculating(NewMemory(0)), p, picks(), Options{})
	play(t, st, c.Start(T+1), c.Feed, T+1, "update 0 speculative", "done speculative")
	if tc := attr(t, st, bucketRef, 0, "b_rps_tc"); tc != 2000 {
		t.Fatalf("tc %d, want 2000", tc)
	}
}

// Many writers start on a bucket at once, and a client knows no rate of
// it yet. Its image (20 ms old) says full, so it sends the full write;
// another writer's write landed first (the bucket is 5 ms from full), and
// the failed write's item shows 10 writes in those 20 ms: a first,
// provisional rate of 0.5 a ms. The retry burns headroom with it at once
// (one and a half intervals at 5 ms of the 10 ms target, 2 tokens beside
// its own), rather than leave the bucket to fill up under the others.
func TestStoryFirstLostRaceBurnsHeadroom(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 1000)}, map[string]int64{"rps": 1})
	st := sim(t, shape{rf: T - 5, tk: map[string]int64{"rps": 990_000}, tc: map[string]int64{"wcu": 10_000}}.item(p))
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T - 5000}.item(p), 1, T-20)
	c := NewCharge(m, p, picks(), Options{})
	play(t, st, c.Start(T), c.Feed, T, "update 0 full", "update 0 retry", "done retry")
	if tk := attr(t, st, bucketRef, 0, "b_rps_tk"); tk != 990_000-1000-2000 {
		t.Fatalf("tk %d, want 987000: the charge and 2 tokens of headroom", tk)
	}
}

// A client's image is stale: another client doubled the bucket since. Its
// full write to shard 0 fails (shard_count is 2 now) and returns the item
// showing 2. The writers that have not learned it crowd shard 0, so it
// spreads out at the new count: shard 1, which serves.
func TestStoryStaleCountAfterADoubling(t *testing.T) {
	p := plan1(bucketRef)
	rps := func(tk int64) map[string]int64 { return map[string]int64{"rps": tk} }
	st := sim(t, shape{n: 2, rf: T - 10, tk: rps(3000)}.item(p), shape{shard: 1, n: 2, rf: T - 10, tk: rps(4000)}.item(p))
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shape{rf: T - 2000}.item(p), 1, T-2000) // full, one shard
	c := NewCharge(m, p, picks(), Options{})

	play(t, st, c.Start(T), c.Feed, T, "update 0 full", "update 1 speculative", "done speculative")
	if c.Shard != 1 || c.N != 2 || m.Count(bucketRef) != 2 {
		t.Fatalf("charged shard %d of %d, remembered %d; want shard 1 of 2", c.Shard, c.N, m.Count(bucketRef))
	}
	if tk0, tk1 := attr(t, st, bucketRef, 0, "b_rps_tk"), attr(t, st, bucketRef, 1, "b_rps_tk"); tk0 != 3000 || tk1 != 3000 {
		t.Fatalf("shards hold %d and %d, want 3000 (untouched) and 4000-1000", tk0, tk1)
	}
}

// The whole bucket expired, every shard of it, while a client still
// remembers 4 shards, learned two hours ago. No image of shard 0 vouches
// for that count any more (see Memory.trustsCount), so the client writes
// shard 0 first, at 4 shards, and finds nothing; the index lists no other
// shard: the bucket is made again, at one shard, and shard 2 is never
// written (it would refill beside the new shard 0).
func TestStoryWholeBucketExpiredWithAStaleCount(t *testing.T) {
	p := planBusy(bucketRef) // limits that may double the bucket (see Plan.createsInOne)
	st := sim(t)
	m := speculating(NewMemory(0))
	m.learn(bucketRef, 0, nil, 4, T-7_200_000, 0, nil)
	c := NewCharge(m, p, picks(2), Options{})

	play(t, st, c.Start(T), c.Feed, T, "update 0 speculative", "query discover", "put 0 create", "done create")
	if n := attr(t, st, bucketRef, 0, "shard_count"); n != 1 || st.Peek(bucketRef.WithShard(2).Key()) != nil {
		t.Fatalf("shard 0 counts %d, shard 2 exists %v; want 1 and no shard 2", n, st.Peek(bucketRef.WithShard(2).Key()) != nil)
	}
}

// DynamoDB deleted shard 0 of a two-shard bucket (expiry deletes items one
// by one, in no order) while shard 1 lives with 2 tokens. A client with no
// memory writes shard 0, finds nothing, and asks the index for the
// bucket's shards before making it: shard 1, at 2 shards. Shard 0 is made
// at 2 shards, with half the burst: not a whole burst beside shard 1's.
func TestStoryShardZeroExpiredBesideItsSibling(t *testing.T) {
	p := planBusy(bucketRef) // limits that may double the bucket (see Plan.createsInOne)
	st := sim(t, shape{shard: 1, n: 2, rf: T - 100, tk: map[string]int64{"rps": 2000}}.item(p))
	c := NewCharge(speculating(NewMemory(0)), p, picks(), Options{})

	play(t, st, c.Start(T), c.Feed, T, "update 0 speculative", "query discover", "get [1] discover", "put 0 create", "done create")
	if n, tk := attr(t, st, bucketRef, 0, "shard_count"), attr(t, st, bucketRef, 0, "b_rps_tk"); n != 2 || tk != 4000 {
		t.Fatalf("shard 0 made at %d shards holding %d; want 2 shards, 5000-1000", n, tk)
	}
}

// A local refusal promises a time. At T the client's write left the
// bucket empty. At T+10 an acquire is refused locally: retry after 90 ms
// (a token refills in 100). At T+99 another is refused too, 1 ms to go.
// At T+100 one acquire goes to the store, and while its write is in
// flight another comes. The promise has come, and a caller who waited a
// refusal's wait is never refused by a guess: what the other writers
// likely took is not counted. But the one token there is the one this
// process's own write in flight takes, which is no guess: refused
// locally, retry after 100 ms, without a write bound to fail. The store's
// yes clears the promise. Had no write of the process been in flight,
// the acquire would have asked the store whatever its estimate.
func TestStoryLocalRefusalKeepsItsPromise(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T, tk: map[string]int64{"rps": 0}}.item(p), 1, T)
	acquire := func(now int64) (*Charge, Step) {
		c := NewCharge(m, p, picks(), Options{})
		return c, c.Start(now)
	}

	_, s := acquire(T + 10)
	if describe(s) != "refused local" || retryMs(t, s.Refused) != 90 {
		t.Fatalf("at T+10: %q, want refused local (retry after 90 ms)", describe(s))
	}
	if _, s = acquire(T + 99); describe(s) != "refused local" || retryMs(t, s.Refused) != 1 {
		t.Fatalf("at T+99: %q, want refused local (retry after 1 ms)", describe(s))
	}
	first, s1 := acquire(T + 100)
	if describe(s1) != "update 0 speculative" {
		t.Fatalf("at T+100: %q, want the consumption-only write (the refill pays, fh shows it)", describe(s1))
	}
	if _, s = acquire(T + 100); describe(s) != "refused local" || retryMs(t, s.Refused) != 100 {
		t.Fatalf("second at T+100: %q, want refused local (the token is this process's write in flight), retry after 100 ms", describe(s))
	}
	v := m.View(bucketRef, 0)
	v.Pending = nil
	v.Drain = map[string]float64{"rps": 9}
	if p.refusesLocally(&v, 1, T+100, Options{}) {
		t.Fatal("without a write in flight, the promise has come: the store is asked, whatever others likely took")
	}
	if s = first.Feed(wrote(shape{rf: T + 100, tk: map[string]int64{"rps": 0}}.item(p)), T+100); !s.Done || m.View(bucketRef, 0).Promise != 0 {
		t.Fatalf("%q, promise T%+d; want done and the promise cleared", describe(s), m.View(bucketRef, 0).Promise-T)
	}
}

// DynamoDB bills a failed conditional write like one that applied. An
// acquire refused by the store (its write failed) leaves that write to be
// charged to the shard's write units by the client's next write there:
// 100 ms later the next acquire's write charges two units.
func TestStoryFailedWriteIsBilledByTheNext(t *testing.T) {
	p := plan1(bucketRef)
	st := sim(t, shape{rf: T, tk: map[string]int64{"rps": 0}}.item(p))
	m := speculating(NewMemory(0))
	c := NewCharge(m, p, picks(), Options{})
	play(t, st, c.Start(T), c.Feed, T, "update 0 speculative", "refused reject")

	c = NewCharge(m, p, picks(), Options{})
	play(t, st, c.Start(T+100), c.Feed, T+100, "update 0 speculative", "done speculative")
	if w := attr(t, st, bucketRef, 0, "b_wcu_tc"); w != 2000 {
		t.Fatalf("wcu_tc %d, want 2000: the failed write and the one that applied", w)
	}
}

// A client measured shard 0 at its ceiling and finds its write units
// spent: it doubles, but the doubling write is throttled too. The
// partition stays hot, and the doubling is what helps, so the next
// acquire tries the doubling first. It lands; that acquire spreads to the
// new shard, and the one after goes straight to a shard.
func TestStoryThrottledDoublingIsPressed(t *testing.T) {
	p := planBusy(bucketRef)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shape{rf: T - 10, tk: map[string]int64{"rps": 8000}}.item(p), 1, T-10)
	measured(m, bucketRef, 0, 1, 0.9, T, nil)
	spent := shape{rf: T, tk: map[string]int64{"rps": 8000, "wcu": 0}}

	c := NewCharge(m, p, picks(), Options{})
	last := converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 full", failed(spent.item(p))},
		{"update 0 double", throttle},
		{"update 0 normal", Result{}},
	})
	if last.Err != nil || m.pendingDoubling(bucketRef, T) != 1 {
		t.Fatalf("err %v, pending doubling from %d; want the acquire's own write (a throttled doubling is no answer), and the doubling from 1 pending", last.Err, m.pendingDoubling(bucketRef, T))
	}

	c = NewCharge(m, p, picks(1), Options{})
	converse(t, c.Start(T+5), c.Feed, T+5, []exchange{
		{"update 0 double", wrote(shape{n: 2, rf: T, tk: spent.tk}.item(p))},
		{"update 1 speculative", Result{}},
	})
	c = NewCharge(m, p, picks(1), Options{})
	if s := c.Start(T + 6); describe(s) != "update 1 speculative" || m.pendingDoubling(bucketRef, T+6) != 0 {
		t.Fatalf("after the doubling landed: %q, pending %d; want a shard, nothing pending", describe(s), m.pendingDoubling(bucketRef, T+6))
	}
}

// A client measured shard 0 at its ceiling (a write a ms). Its writes are
// throttled: the first two throttles are the answer to their acquires
// (one throttle may be bad luck), once shard 0's count, read for a
// doubling the client has not learned of, shows none; the third within a
// second marks the partition hot, and that acquire doubles the bucket.
func TestStoryThrottlesOnAHotPartitionDouble(t *testing.T) {
	p := planBusy(bucketRef)
	m := NewMemory(0)
	one := shape{rf: T - 10, tk: map[string]int64{"rps": 8000}}.item(p)
	knows(t, m, bucketRef, one, 1, T-10)
	measured(m, bucketRef, 0, 1, 0.9, T, nil)
	for i := range 2 {
		c := NewCharge(m, p, picks(), Options{})
		now := T + int64(i)
		converse(t, c.Start(now), c.Feed, now, []exchange{{"update 0 full", throttle}, {"get [0] discover", found(one)}, {"err", Result{}}})
	}
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T+2), c.Feed, T+2, []exchange{{"update 0 full", throttle}, {"update 0 double", Result{}}})
}

// A client that measured shard 0 at its ceiling has not learned that
// another process doubled the bucket: its write to shard 0 is throttled
// (the others that have not learned it either crowd it), and returns no
// item. Rather than answer unavailable, it reads shard 0's count, learns
// the doubling, and writes to the new shard.
func TestStoryAThrottleOnAShardTheOthersSplitSpreads(t *testing.T) {
	p := planBusy(bucketRef)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shape{rf: T - 10, tk: map[string]int64{"rps": 8000}}.item(p), 1, T-10)
	measured(m, bucketRef, 0, 1, 0.9, T, nil)
	doubled := shape{n: 2, rf: T - 5, tk: map[string]int64{"rps": 4000}}.item(p)
	c := NewCharge(m, p, picks(1), Options{})
	last := converse(t, c.Start(T), c.Feed, T, []exchange{
		{"update 0 full", throttle},
		{"get [0] discover", found(doubled)},
		{"update 1 speculative", Result{}},
	})
	if last.Err != nil || m.Count(bucketRef) != 2 {
		t.Fatalf("err %v, count %d: want the write on shard 1 of 2", last.Err, m.Count(bucketRef))
	}
}

// The same three throttles, but two other buckets were throttled within
// the second too: throttles across many buckets are a storm (a fault, a
// noisy neighbour), not this partition's load, and doubling would not
// help. The third throttle is the answer, as the first two.
func TestStoryThrottleStormIsNotAHotPartition(t *testing.T) {
	p := planBusy(bucketRef)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shape{rf: T - 10, tk: map[string]int64{"rps": 8000}}.item(p), 1, T-10)
	measured(m, bucketRef, 0, 1, 0.9, T, nil)
	for i, e := range []string{"a", "b"} {
		other := planBusy(keys.Bucket{Namespace: "ns", Entity: e, Resource: "r"})
		c := NewCharge(m, other, picks(), Options{})
		now := T + int64(i)
		converse(t, c.Start(now), c.Feed, now, []exchange{{"update 0 speculative", throttle}, {"err", Result{}}})
	}
	one := shape{rf: T - 10, tk: map[string]int64{"rps": 8000}}.item(p)
	for i := range 3 {
		c := NewCharge(m, p, picks(), Options{})
		now := T + 2 + int64(i)
		converse(t, c.Start(now), c.Feed, now, []exchange{{"update 0 full", throttle}, {"get [0] discover", found(one)}, {"err", Result{}}})
	}
}

// Under contention every write fails: each returns an item with the
// tokens, written by someone else since. After the first write and 32
// more on the shard, the machine stops and refuses from the latest item.
// The tokens it shows went to the others: the refusal names the limit it
// charges, and its wait is one refill of the request (100 ms at 10/s), not
// "at once", which would send the caller straight back into the race.
func TestStoryLostEveryRace(t *testing.T) {
	p := plan1(bucketRef)
	c := NewCharge(NewMemory(0), p, picks(), Options{})
	s, calls := c.Start(T), 0
	for ; s.Call != nil; calls++ {
		s = c.Feed(failed(shape{rf: T, tk: map[string]int64{"rps": 5000}}.item(p)), T)
	}
	if calls != 1+maxSlowAttempts || describe(s) != "refused reject" || s.Refused.Img == nil {
		t.Fatalf("%d calls then %q; want %d, then a refusal from the item", calls, describe(s), 1+maxSlowAttempts)
	}
	vs := s.Refused.Views()
	if len(vs) != 1 || !vs[0].Exceeded || vs[0].Name != "rps" || vs[0].RetryMs != 100 {
		t.Fatalf("views %+v; want rps exceeded, retry after 100 ms", vs)
	}
}

// A tenant offers ten times its 10/s limit from many processes: their
// refused attempts, not its admitted ones, heat the partition, and writes
// are throttled while the bucket is drained (the client's item holds 2 of
// its 10 tokens). A 10/s limit can never need a second shard, so the
// throttle is answered as what it says of the bucket (its tokens are raced
// for): a refusal naming the limit, with a wait as if the others took
// nearly all of the refill, but at most the refill of half the burst (so
// that the bucket does not fill up while every process waits: 500 ms for
// a token of a burst of 10 at 10/s); no doubling, however
// hot the client measured the partition. Until that wait is over the
// process refuses the bucket's acquires locally, even from an item that
// shows tokens; after it, the next acquire asks the store.
func TestStoryRefusedTrafficNeverDoubles(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T - 10, tk: map[string]int64{"rps": 2000}}.item(p), 1, T-10)
	measured(m, bucketRef, 0, 1, 0.9, T, nil)
	for i := range 3 {
		c := NewCharge(m, p, picks(), Options{})
		now := T + int64(i)
		want := "refused reject"
		if i > 0 {
			want = "refused local"
		}
		s := c.Start(now)
		if i == 0 {
			s = converse(t, s, c.Feed, now, []exchange{{"update 0 speculative", throttle}, {want, Result{}}})
		}
		if describe(s) != want {
			t.Fatalf("acquire %d: %q, want %q", i, describe(s), want)
		}
		vs := s.Refused.Views()
		if len(vs) != 1 || !vs[0].Exceeded || vs[0].RetryMs != 500 {
			t.Fatalf("acquire %d: views %+v; want rps exceeded, a wait of 500 ms", i, vs)
		}
	}
	if m.pendingDoubling(bucketRef, T) != 0 || m.Count(bucketRef) != 1 {
		t.Fatalf("pending doubling %d, count %d: refused traffic doubled the bucket", m.pendingDoubling(bucketRef, T), m.Count(bucketRef))
	}
	c := NewCharge(m, p, picks(), Options{})
	if s := c.Start(T + 500); describe(s) != "update 0 speculative" {
		t.Fatalf("after the wait: %q, want the store asked", describe(s))
	}
}

// The same throttle on a 10/s bucket that the client last saw full is not
// the bucket's own traffic (a storm, a noisy neighbour): it is the answer,
// as on any bucket, and nothing is refused for it.
func TestStoryThrottleOnAFullQuietBucketIsNoRefusal(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	knows(t, m, bucketRef, shape{rf: T - 10, tk: map[string]int64{"rps": 9000}}.item(p), 1, T-10)
	c := NewCharge(m, p, picks(), Options{})
	converse(t, c.Start(T), c.Feed, T, []exchange{{"update 0 speculative", throttle}, {"err", Result{}}})
	c = NewCharge(m, p, picks(), Options{})
	if s := c.Start(T + 1); describe(s) != "update 0 speculative" {
		t.Fatalf("the next acquire: %q, want the store asked", describe(s))
	}
}

// Two processes start on a bucket another writer keeps below its burst:
// its item, full at T-140 when each got it, says full by now. Neither has
// measured the others yet. A got the item from its own full write: it
// knows when its own refill is full again, and writes the full write,
// which finds the bucket below its burst (the other writer consumed
// since) and retries. B got the item from another writer's refill: a full
// item of someone else's says nothing of whether they wrote since, so B
// writes the consumption-only write, which lands. (128 processes starting
// at once, each with one item of another's refill, all made the full
// write, which only one wins.)
func TestStoryAnItemAnotherRefilledSaysNothingOfTheOthers(t *testing.T) {
	p := plan1(bucketRef)
	seen := shape{rf: T - 1140}.item(p)
	st := sim(t, shape{rf: T - 5, tk: map[string]int64{"rps": 9000}}.item(p)) // full at T+95
	ma, mb := speculating(NewMemory(0)), speculating(NewMemory(0))
	knows(t, ma, bucketRef, seen, 1, T-140)
	heard(t, mb, bucketRef, seen, 1, T-140)
	a := NewCharge(ma, p, picks(), Options{})
	sa := play(t, st, a.Start(T), a.Feed, T, "update 0 full", "update 0 retry")
	play(t, st, sa, a.Feed, T, "update 0 retry", "done retry")
	b := NewCharge(mb, p, picks(), Options{})
	play(t, st, b.Start(T), b.Feed, T, "update 0 speculative", "done speculative")
}

// Whose refill an item shows is learned from the write that returned it.
// A process that knows nothing of a bucket writes, then writes again
// 200 ms later, before any estimate of the others: after its full write
// (the bucket was full), its item of its own refill says full by now, and
// it makes the full write; after its consumption-only write, the item
// shows another's rf on a bucket below its limit, and it makes the
// consumption-only write.
func TestOwnRefillIsTheFullOrNormalWrites(t *testing.T) {
	p := plan1(bucketRef)
	for _, c := range []struct {
		name  string
		seen  store.Item // the bucket as the first write finds it
		first []string
		then  string
	}{
		{"full", shape{rf: T - 5000}.item(p), []string{"update 0 speculative", "update 0 full", "done full"}, "update 0 full"},
		{"consumption-only", shape{rf: T - 5, tk: map[string]int64{"rps": 9000}}.item(p), []string{"update 0 speculative", "done speculative"}, "update 0 speculative"},
	} {
		st := sim(t, c.seen)
		m := speculating(NewMemory(0))
		a := NewCharge(m, p, picks(), Options{})
		play(t, st, a.Start(T), a.Feed, T, c.first...)
		b := NewCharge(m, p, picks(), Options{})
		if s := b.Start(T + 200); describe(s) != c.then {
			t.Errorf("%s: then %q, want %q", c.name, describe(s), c.then)
		}
	}
}

// A process remembers a bucket of 4 shards across the expiry of shard 0.
// Its own write to shard 0 at T showed the count; every write leaves an
// item's ttl at least half an hour later, so for 25 minutes that image
// vouches for 4 shards and the process spreads over them. Two hours later
// shard 0 has expired and another process has made it again at one
// shard, full, in one call (without looking for the old shards), while
// shards 1-3 live on with their tokens. The process's image of shard 0 no
// longer vouches for anything: it writes shard 0 first, at 4 shards, and
// the write fails and teaches the count in force, 1. The old shards are
// never written again: their tokens beside the new shard 0's full burst
// would admit more than a burst at one instant.
func TestStoryACountRememberedAcrossShardZerosExpiry(t *testing.T) {
	p := plan1(bucketRef)
	old := func(s int) store.Item { return shape{shard: s, n: 4, rf: T}.item(p) }
	st := sim(t, old(0), old(1), old(2), old(3))
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, old(0), 4, T)

	at := T + 24*60_000
	c := NewCharge(m, p, picks(2), Options{})
	play(t, st, c.Start(at), c.Feed, at, "update 2 speculative", "update 2 full", "done full")

	at = T + 2*3_600_000
	if _, err := st.Delete(context.Background(), store.DeleteInput{Key: bucketRef.WithShard(0).Key()}); err != nil {
		t.Fatal(err)
	}
	remade := shape{rf: at}.item(p)
	if _, err := st.Put(context.Background(), store.PutInput{Item: remade}); err != nil {
		t.Fatal(err)
	}
	left := []store.Item{st.Peek(bucketRef.WithShard(1).Key()), st.Peek(bucketRef.WithShard(2).Key()), st.Peek(bucketRef.WithShard(3).Key())}
	for i := 0; i < 3; i++ {
		c = NewCharge(m, p, picks(1, 2, 3), Options{})
		step, _ := drive(st, func() int64 { return at }, c.Start(at), c.Feed)
		if !step.Done || c.Shard != 0 || c.N != 1 {
			t.Fatalf("acquire %d: %q on shard %d of %d, want done on shard 0 of 1", i, describe(step), c.Shard, c.N)
		}
	}
	for s := 1; s < 4; s++ {
		if !reflect.DeepEqual(st.Peek(bucketRef.WithShard(s).Key()), left[s-1]) {
			t.Fatalf("shard %d, left over from before shard 0 expired, was written", s)
		}
	}
}
