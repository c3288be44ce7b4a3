package engine

import (
	"fmt"
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// What a client remembers of a shard and the estimates it takes from it.
// Images here are of plan1's bucket (rps10 and the hidden wcu), made with
// the write units (wcu_tc, whole units) and rps consumption (rps_tc,
// millitokens) a window needs.

// counted is an image of shard 0 at rf whose counters show units write
// units and rps millitokens consumed in all.
func counted(t *testing.T, rf, units, rps int64) *Image {
	t.Helper()
	p := plan1(bucketRef)
	return image(t, shape{rf: rf, tc: map[string]int64{"wcu": units * 1000, "rps": rps}}.item(p))
}

// A rate is the growth of the shard's write units over a window of at
// least rateWindowMs, on the client's clock; the others' rate leaves out
// what this client's own writes added, and their drain of each limit what
// it consumed itself. A shorter window is noise: no estimate (but see
// TestTheFirstEstimateComesSooner).
func TestRatesComeFromAWindowOfImages(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	m.learn(bucketRef, 0, counted(t, T, 0, 0), 1, T, 0, nil)
	m.learn(bucketRef, 0, counted(t, T, 10, 5_000), 1, T+firstWindowMs-1, 0, nil)
	if v := m.View(bucketRef, 0); v.RateAt != 0 {
		t.Fatalf("estimate after %d ms: %+v, want none", firstWindowMs-1, v)
	}
	// The window closes with this client's own write of one unit and one
	// token: 400 units and 200 tokens in 400 ms.
	m.learn(bucketRef, 0, counted(t, T, 400, 200_000), 1, T+rateWindowMs, 0, p)
	v := m.View(bucketRef, 0)
	if v.RateAt != T+rateWindowMs || v.Rate != 1 || v.Others != 399.0/400 {
		t.Fatalf("rate %v, others %v at %d; want 1 and 0.9975 (own write left out) at T+400", v.Rate, v.Others, v.RateAt-T)
	}
	if d := v.Drain["rps"]; d != 199_000.0/400 {
		t.Fatalf("drain %v millitokens/ms, want 497.5 (own token left out)", d)
	}
	if _, ok := v.Drain["wcu"]; ok {
		t.Fatal("the hidden limit has a drain: it is no one's consumption")
	}
	// The next window counts from the image that closed this one.
	m.learn(bucketRef, 0, counted(t, T, 600, 200_000), 1, T+2*rateWindowMs, 0, nil)
	if v := m.View(bucketRef, 0); v.Rate != 0.5 || v.Others != 0.5 || len(v.Drain) != 0 {
		t.Fatalf("second window: rate %v others %v drain %v; want 0.5, 0.5, none", v.Rate, v.Others, v.Drain)
	}
}

// Before its first full window, a shard's rates are taken from the
// shorter window so far, provisionally: they say that others write and how
// often (headroom needs it on a bucket many writers start on at once), but
// not that the partition is hot, nor what the others consume (RateAt stays
// 0, no drain). The full window still counts from its first image.
func TestEarlyRatesBeforeTheFirstWindow(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	m.learn(bucketRef, 0, counted(t, T, 0, 0), 1, T, 0, nil)
	m.learn(bucketRef, 0, counted(t, T, 40, 40_000), 1, T+20, 0, p)
	v := m.View(bucketRef, 0)
	if v.Rate != 2 || v.Others != 39.0/20 || v.RateAt != 0 || len(v.Drain) != 0 {
		t.Fatalf("after 20 ms: rate %v others %v at %d, drain %v; want 2, 1.95, never, none", v.Rate, v.Others, v.RateAt, v.Drain)
	}
	if v.busyness(T+20) != busyNo {
		t.Fatal("a provisional rate of twice the ceiling says the partition is hot")
	}
	m.learn(bucketRef, 0, counted(t, T, 400, 200_000), 1, T+rateWindowMs, 0, nil)
	if v := m.View(bucketRef, 0); v.RateAt != T+rateWindowMs || v.Rate != 1 || v.Others != 399.0/400 {
		t.Fatalf("first window: rate %v others %v at %d; want 1, 0.9975 at T+400", v.Rate, v.Others, v.RateAt-T)
	}
}

// A slow answer describes the item as it was up to its latency ago: it is
// remembered, but takes no rate; an answer of maxRateLatency does.
func TestSlowAnswersTakeNoRate(t *testing.T) {
	for _, c := range []struct {
		lat  int64
		rate bool
	}{{maxRateLatency, true}, {maxRateLatency + 1, false}} {
		m := NewMemory(0)
		m.learn(bucketRef, 0, counted(t, T, 0, 0), 1, T, 0, nil)
		late := counted(t, T, 400, 0)
		m.learn(bucketRef, 0, late, 1, T+rateWindowMs, c.lat, nil)
		v := m.View(bucketRef, 0)
		if v.Img != late || (v.RateAt != 0) != c.rate {
			t.Errorf("latency %d ms: image kept %v, estimate at %d; want the image, an estimate %v", c.lat, v.Img == late, v.RateAt, c.rate)
		}
	}
}

// Concurrent writes answer out of order: an answer that shows fewer
// writes and no later refill than the image held was overtaken, and is
// dropped. An item that expired and was made again shows fewer writes
// too, but a later refill: it replaces the image.
func TestOvertakenAnswersAreDropped(t *testing.T) {
	m := NewMemory(0)
	newer := counted(t, T, 10, 0)
	m.learn(bucketRef, 0, newer, 1, T, 0, nil)
	m.learn(bucketRef, 0, counted(t, T, 9, 0), 1, T+1, 0, nil)
	if v := m.View(bucketRef, 0); v.Img != newer || v.At != T {
		t.Fatalf("an overtaken answer replaced the image (at T%+d)", v.At-T)
	}
	remade := counted(t, T+1, 1, 0)
	m.learn(bucketRef, 0, remade, 1, T+2, 0, nil)
	if v := m.View(bucketRef, 0); v.Img != remade {
		t.Fatal("the item made again after expiry was dropped as overtaken")
	}
	// Its counters start again: the window restarts from it, so no rate
	// is taken across the two items.
	m.learn(bucketRef, 0, counted(t, T+1, 401, 0), 1, T+2+rateWindowMs, 0, nil)
	if v := m.View(bucketRef, 0); v.Rate != 1 {
		t.Fatalf("rate %v after the item was made again, want 1 (400 units in 400 ms)", v.Rate)
	}
}

// Shard 0 is the authority on the count; another shard only teaches a
// larger one. Learning that a known count grew marks a doubling (for
// growthCooldown) and restarts the rate windows; the first count a client
// learns of a bucket is no growth.
func TestLearningTheShardCount(t *testing.T) {
	m := NewMemory(0)
	m.learn(bucketRef, 0, nil, 4, T, 0, nil)
	if m.Count(bucketRef) != 4 || m.grewRecently(bucketRef, T) {
		t.Fatalf("count %d, grew %v: want 4, and no growth (first learned)", m.Count(bucketRef), m.grewRecently(bucketRef, T))
	}
	m.learn(bucketRef, 3, nil, 2, T, 0, nil)
	if m.Count(bucketRef) != 4 {
		t.Fatalf("shard 3 taught a smaller count: %d", m.Count(bucketRef))
	}
	m.learn(bucketRef, 0, nil, 2, T, 0, nil)
	if m.Count(bucketRef) != 2 {
		t.Fatalf("shard 0 teaches the count in force (2), memory has %d", m.Count(bucketRef))
	}
	m.learn(bucketRef, 0, counted(t, T, 0, 0), 2, T, 0, nil)
	m.learn(bucketRef, 1, nil, 8, T+10, 0, nil)
	if m.Count(bucketRef) != 8 || !m.grewRecently(bucketRef, T+10) {
		t.Fatalf("count %d, grew %v after shard 1 taught 8: want 8, grown", m.Count(bucketRef), m.grewRecently(bucketRef, T+10))
	}
	if m.grewRecently(bucketRef, T+10+growthCooldown-1) != true || m.grewRecently(bucketRef, T+10+growthCooldown) {
		t.Fatalf("the growth is recent for exactly %d ms", growthCooldown)
	}
	// The window that straddled the doubling says nothing: a new one
	// starts at the next image.
	m.learn(bucketRef, 0, counted(t, T, 400, 0), 8, T+rateWindowMs, 0, nil)
	if v := m.View(bucketRef, 0); v.RateAt != 0 {
		t.Fatalf("a rate was taken across the doubling: %+v", v)
	}
}

// Failed writes are charged to the shard's write units by the next write,
// at most maxCarried at once, and only while recent (carriedAge).
func TestFailedWritesAreCarriedToTheNextWrite(t *testing.T) {
	m := NewMemory(0)
	if got := m.carry(bucketRef, 0, 10, false, T); got != 0 {
		t.Fatalf("leaving 10 failed writes took %d", got)
	}
	if got := m.carry(bucketRef, 0, 0, true, T+carriedAge); got != maxCarried {
		t.Fatalf("took %d, want %d (at most maxCarried)", got, maxCarried)
	}
	if got := m.carry(bucketRef, 0, 0, true, T+carriedAge); got != 2 {
		t.Fatalf("took %d, want the 2 left", got)
	}
	m.carry(bucketRef, 0, 3, false, T)
	if got := m.carry(bucketRef, 0, 0, true, T+carriedAge+1); got != 0 {
		t.Fatalf("took %d failed writes older than %d ms, want none", got, carriedAge)
	}
	if got := m.carry(bucketRef, 1, 1, true, T); got != 1 {
		t.Fatalf("a write charging its own failure took %d, want 1", got)
	}
}

// Throttles mark a shard hot only on a partition the client measured
// busy: at its ceiling, busyThrottles within hotWindow; near it,
// hotThrottles that are at least half of the writes. Writes at an older
// shard count, or throttles of a storm across buckets, do not count.
func TestThrottlesMarkAHotShard(t *testing.T) {
	throttles := func(m *Memory, ref keys.Bucket, k int, busy busyness, at int64) (hot bool) {
		for i := 0; i < k; i++ {
			hot = m.noteWrite(ref, 0, 1, true, busy, at)
		}
		return hot
	}
	m := NewMemory(0)
	if throttles(m, bucketRef, busyThrottles-1, busyCeiling, T) || !throttles(m, bucketRef, 1, busyCeiling, T+hotWindow) {
		t.Fatalf("at the ceiling: hot after exactly %d throttles within %d ms", busyThrottles, hotWindow)
	}
	m = NewMemory(0)
	throttles(m, bucketRef, busyThrottles-1, busyCeiling, T)
	if throttles(m, bucketRef, 1, busyCeiling, T+hotWindow+1) {
		t.Fatal("throttles from an older window counted")
	}
	m = NewMemory(0)
	throttles(m, bucketRef, busyThrottles-1, busyCeiling, T)
	m.noteWrite(bucketRef, 0, 2, true, busyCeiling, T) // the bucket doubled: a new window
	if m.noteWrite(bucketRef, 0, 2, true, busyCeiling, T) {
		t.Fatal("throttles at the old shard count counted at the new one")
	}
	m = NewMemory(0)
	if throttles(m, bucketRef, 10, busyNo, T) {
		t.Fatal("a shard not measured busy was marked hot: that is a storm's signature")
	}

	// Near the ceiling: hotThrottles, and at least half of the writes
	// since the first throttle.
	m = NewMemory(0)
	throttles(m, bucketRef, 1, busyNear, T)
	for i := 0; i < hotThrottles+2; i++ {
		if m.noteWrite(bucketRef, 0, 1, false, busyNear, T) {
			t.Fatal("a write that went through made the shard hot")
		}
	}
	if throttles(m, bucketRef, hotThrottles-1, busyNear, T) {
		t.Fatal("hot with 5 throttles of 12 writes")
	}
	if !throttles(m, bucketRef, 2, busyNear, T) {
		t.Fatal("not hot with 7 throttles of 14 writes: exactly half")
	}
	m = NewMemory(0)
	if throttles(m, bucketRef, hotThrottles-1, busyNear, T) || !throttles(m, bucketRef, 1, busyNear, T) {
		t.Fatalf("near the ceiling: hot after exactly %d throttles", hotThrottles)
	}

	// A storm: three buckets throttled within a second.
	m = NewMemory(0)
	other := func(e string) keys.Bucket { b := bucketRef; b.Entity = e; return b }
	m.noteWrite(other("a"), 0, 1, true, busyNo, T)
	m.noteWrite(other("b"), 0, 1, true, busyNo, T+stormWindowMs)
	if throttles(m, bucketRef, busyThrottles, busyCeiling, T+stormWindowMs) {
		t.Fatal("a storm across three buckets marked one of them hot")
	}
	m = NewMemory(0)
	m.noteWrite(other("a"), 0, 1, true, busyNo, T)
	m.noteWrite(other("a"), 0, 1, true, busyNo, T)
	m.noteWrite(other("b"), 0, 1, true, busyNo, T)
	if !throttles(m, bucketRef, busyThrottles, busyCeiling, T+stormWindowMs+1) {
		t.Fatal("throttles of two buckets (a second apart from the third) taken for a storm")
	}
	// A write that is not throttled, to a bucket or shard the memory does
	// not know, leaves nothing behind.
	m = NewMemory(0)
	if m.noteWrite(bucketRef, 0, 1, false, busyCeiling, T) || m.Len() != 0 {
		t.Fatal("a write that went through made an entry")
	}
}

// A doubling refused by a throttle is pressed on the next acquires for
// doublingPersistence, until the count grows past it, and only from the
// count in force.
func TestAPendingDoublingIsPressedForAWhile(t *testing.T) {
	m := NewMemory(0)
	m.setPendingDoubling(bucketRef, 1, T)
	if m.pendingDoubling(bucketRef, T+doublingPersistence) != 1 || m.pendingDoubling(bucketRef, T+doublingPersistence+1) != 0 {
		t.Fatalf("pressed until T+%d exactly", doublingPersistence)
	}
	if m.pendingDoubling(bucketRef, T) != 0 {
		t.Fatal("an expired doubling came back")
	}
	m.setPendingDoubling(bucketRef, 1, T)
	m.learn(bucketRef, 0, nil, 2, T, 0, nil)
	if m.pendingDoubling(bucketRef, T) != 0 {
		t.Fatal("still pressing a doubling from 1 at 2 shards")
	}
	m.setPendingDoubling(bucketRef, 1, T) // from a count that is no longer in force
	if m.pendingDoubling(bucketRef, T) != 0 {
		t.Fatal("a doubling from 1 recorded at 2 shards")
	}
	m.setPendingDoubling(bucketRef, 2, T)
	m.setPendingDoubling(bucketRef, 0, T)
	if m.pendingDoubling(bucketRef, T) != 0 {
		t.Fatal("setPendingDoubling(0) did not clear it")
	}
	if NewMemory(0).pendingDoubling(bucketRef, T) != 0 {
		t.Fatal("an unknown bucket has a pending doubling")
	}
}

// This process's writes in flight count as consumption the next acquire
// must leave room for, and make every writer of the shard another's
// competitor; answered, they are forgotten.
func TestWritesInFlight(t *testing.T) {
	m := NewMemory(0)
	p := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 2})
	measured(m, bucketRef, 0, 0.5, 0.1, T, nil)
	_, si := m.viewOf(bucketRef, 0)
	m.reserve(si, p, 1)
	m.reserve(si, p, 1)
	v := m.View(bucketRef, 0)
	if v.Pending["rps"] != 4000 || len(v.Pending) != 1 || v.Others != v.Rate {
		t.Fatalf("pending %v, others %v (rate %v); want rps 4000 only, every writer an other", v.Pending, v.Others, v.Rate)
	}
	m.reserve(si, p, -1)
	m.reserve(si, p, -1)
	if v := m.View(bucketRef, 0); v.Pending != nil || v.Others != 0.1 {
		t.Fatalf("after the answers: pending %v, others %v; want none, 0.1", v.Pending, v.Others)
	}
}

// The memory is bounded: past its size it forgets the bucket least
// recently used. Forget and ForgetBucket drop what it holds.
func TestMemoryIsBounded(t *testing.T) {
	if NewMemory(0).buckets == nil || NewMemory(-1).buckets == nil {
		t.Fatal("no cache for a size below 1")
	}
	one := NewMemory(1)
	one.learn(keys.Bucket{Entity: "a"}, 0, nil, 2, T, 0, nil)
	one.learn(keys.Bucket{Entity: "b"}, 0, nil, 2, T, 0, nil)
	if one.Len() != 1 {
		t.Fatalf("a memory of one bucket holds %d", one.Len())
	}
	m := NewMemory(2)
	refs := []keys.Bucket{{Entity: "a"}, {Entity: "b"}, {Entity: "c"}}
	for _, r := range refs {
		m.learn(r, 0, nil, 2, T, 0, nil)
	}
	if m.Len() != 2 || m.Count(refs[0]) != 1 || m.Count(refs[2]) != 2 {
		t.Fatalf("len %d, a %d, c %d: want 2 buckets, a forgotten", m.Len(), m.Count(refs[0]), m.Count(refs[2]))
	}
	m.ForgetBucket(refs[2])
	if m.Len() != 1 || m.Count(refs[2]) != 1 {
		t.Fatal("ForgetBucket kept the bucket")
	}
	m.noteWrite(refs[1], 0, 1, true, busyNo, T)
	m.Forget()
	if m.Len() != 0 || m.storm.count != 0 {
		t.Fatal("Forget kept something")
	}
	if v := m.View(refs[1], 0); v.Img != nil || v.RateAt != 0 {
		t.Fatal("a view of a forgotten bucket")
	}
}

// Learning the count in force, from any write, leaves a pending doubling
// pressed: only a larger count (the doubling landed, or another's) ends
// it. A write that returned no item teaches no count.
func TestLearningTheSameCountKeepsAPendingDoubling(t *testing.T) {
	m := NewMemory(0)
	m.learn(bucketRef, 0, nil, 2, T, 0, nil)
	m.setPendingDoubling(bucketRef, 2, T)
	m.learn(bucketRef, 0, counted(t, T, 5, 0), 2, T+1, 0, nil)
	if m.pendingDoubling(bucketRef, T+1) != 2 {
		t.Fatal("learning the count in force dropped the pending doubling")
	}
	m.learn(bucketRef, 0, nil, 0, T+1, 0, nil)
	if m.Count(bucketRef) != 2 {
		t.Fatalf("a write that returned no item taught count %d", m.Count(bucketRef))
	}
	if NewMemory(0).grewRecently(bucketRef, T) {
		t.Fatal("an unknown bucket grew recently")
	}
}

// A shard that went quiet is estimated quiet: a window without writes
// closes at rate 0, it does not start over.
func TestAQuietShardIsEstimatedQuiet(t *testing.T) {
	m := NewMemory(0)
	m.learn(bucketRef, 0, counted(t, T, 0, 0), 1, T, 0, nil)
	m.learn(bucketRef, 0, counted(t, T, 400, 0), 1, T+rateWindowMs, 0, nil)
	m.learn(bucketRef, 0, counted(t, T, 400, 0), 1, T+2*rateWindowMs, 0, nil)
	if v := m.View(bucketRef, 0); v.Rate != 0 || v.RateAt != T+2*rateWindowMs {
		t.Fatalf("rate %v at T+%d after a window without writes, want 0 at T+800", v.Rate, v.RateAt-T)
	}
}

// The others' drain of a limit counts what they consumed within the
// window: not the whole counter of a limit the reference image lacked,
// and not this client's own consumption of an earlier window.
func TestDrainIsPerWindow(t *testing.T) {
	p := plan1(bucketRef)
	two := NewPlan(bucketRef, []Limit{rps10, perSecond("tpm", 10)}, map[string]int64{"rps": 1})
	m := NewMemory(0)
	m.learn(bucketRef, 0, counted(t, T, 0, 0), 1, T, 0, nil)
	// Window 1: this client's write of one token; the limit tpm appears
	// with 5,000 consumed in all.
	img := shape{rf: T, tc: map[string]int64{"wcu": 400_000, "rps": 1000, "tpm": 5000}}.item(two)
	m.learn(bucketRef, 0, image(t, img), 1, T+rateWindowMs, 0, p)
	if v := m.View(bucketRef, 0); v.Drain["tpm"] != 0 || v.Drain["rps"] != 0 {
		t.Fatalf("window 1: drain %v, want none (tpm is new, rps was this client's)", v.Drain)
	}
	// Window 2: the others consume 400 of rps.
	img = shape{rf: T, tc: map[string]int64{"wcu": 800_000, "rps": 1400, "tpm": 5000}}.item(two)
	m.learn(bucketRef, 0, image(t, img), 1, T+2*rateWindowMs, 0, nil)
	if v := m.View(bucketRef, 0); v.Drain["rps"] != 1 {
		t.Fatalf("window 2: rps drain %v, want 400 in 400 ms (this client's earlier token is not counted again)", v.Drain["rps"])
	}
}

// Leaving no failed write behind does not keep older ones fresh.
func TestCarryingNothingKeepsNothingFresh(t *testing.T) {
	m := NewMemory(0)
	m.carry(bucketRef, 0, 3, false, T)
	m.carry(bucketRef, 0, 0, false, T+carriedAge)
	if got := m.carry(bucketRef, 0, 0, true, T+carriedAge+1); got != 0 {
		t.Fatalf("took %d failed writes older than %d ms", got, carriedAge)
	}
}

// A client's first estimate of a shard comes after firstWindowMs, not a
// whole window: what the others consume, so that a client joining a
// bucket at its limit soon stops counting every token as its own. The
// write rate, which judges a partition's heat, still waits for a whole
// window, counted from there.
func TestTheFirstEstimateComesSooner(t *testing.T) {
	m := NewMemory(0)
	m.learn(bucketRef, 0, counted(t, T, 0, 0), 1, T, 0, nil)
	m.learn(bucketRef, 0, counted(t, T, 100, 90_000), 1, T+firstWindowMs, 0, nil)
	v := m.View(bucketRef, 0)
	if v.RateAt != T+firstWindowMs || v.Drain["rps"] != 900 || v.Others != 1 || v.Rate != 1 || !v.Provisional {
		t.Fatalf("first estimate at T%+d: drain %v, others %v, rate %v (provisional %v); want at T+100: 900, 1 and 1, provisional", v.RateAt-T, v.Drain["rps"], v.Others, v.Rate, v.Provisional)
	}
	if b := v.busyness(T + firstWindowMs); b != busyNo {
		t.Fatalf("busyness %v from the first estimate, want none", b)
	}
	// The next one takes a whole window from the image that closed it.
	m.learn(bucketRef, 0, counted(t, T, 300, 100_000), 1, T+firstWindowMs+rateWindowMs-1, 0, nil)
	if v := m.View(bucketRef, 0); v.RateAt != T+firstWindowMs {
		t.Fatalf("estimate at T%+d after %d ms, want none before a whole window", v.RateAt-T, rateWindowMs-1)
	}
	m.learn(bucketRef, 0, counted(t, T, 500, 100_000), 1, T+firstWindowMs+rateWindowMs, 0, nil)
	if v := m.View(bucketRef, 0); v.Rate != 1 || v.Drain["rps"] != 25 || v.Provisional {
		t.Fatalf("second estimate: rate %v, drain %v; want 1 and 25", v.Rate, v.Drain["rps"])
	}
}

// A client's first write to a bucket of one shard (the common bucket)
// costs the memory one allocation for the bucket's entry, shard 0's entry
// and its first tallies included, one for the LRU's element, and one for
// the shard's key; its own writes' consumption is tallied without
// allocating.
func TestAFirstBucketOfOneShardAllocatesItsEntryAndKey(t *testing.T) {
	m := NewMemory(0)
	p := plan1(bucketRef)
	refs := make([]keys.Bucket, 500)
	for i := range refs {
		refs[i] = bucketRef
		refs[i].Entity = fmt.Sprintf("entity-%d", i)
	}
	i := 0
	first := func() {
		_, _, si := m.enter(refs[i%len(refs)], 0, T)
		m.reserve(si, p, 1)
		si.own(p)
		i++
	}
	if got := testing.AllocsPerRun(len(refs)-1, first); got > 3 {
		t.Fatalf("a first write to a bucket allocates %v times in the memory, want 3", got)
	}
	if v := m.View(refs[0], 0); v.Pending["rps"] != p.specs[0].amount {
		t.Fatalf("pending %v, want rps %d", v.Pending, p.specs[0].amount)
	}
}

// grewRecently reports whether m learned of a doubling of the bucket within
// growthCooldown of now.
func (m *Memory) grewRecently(ref keys.Bucket, now int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.get(idOf(ref))
	return b != nil && b.grewRecently(now)
}

// An image of shard 0 vouches for the count it shows for 25 minutes after
// the call that brought it, or until 5 minutes before the item's ttl when
// that comes sooner (an item read near its expiry may be deleted, and made
// again at one shard, soon after). A count another shard teaches (a
// doubling) is trusted while shard 0 is vouched for: it is shard 0's.
func TestAnImageOfShardZeroVouchesForItsCount(t *testing.T) {
	p := plan1(bucketRef)
	m := NewMemory(0)
	zero := shape{n: 2, rf: T}.item(p)
	m.learn(bucketRef, 0, image(t, zero), 2, T+100, 100, nil) // the call was made at T
	if !m.trustsCount(bucketRef, 2, T+25*60_000-1) || m.trustsCount(bucketRef, 2, T+25*60_000) {
		t.Fatal("an image of shard 0 vouches for its count for other than 25 minutes after its call")
	}
	ttl, _ := zero.Int(store.AttrTTL)
	near := shape{n: 2, rf: T}.item(p)
	near[store.AttrTTL] = store.Int((T+10*60_000)/1000 + 1) // read 10 minutes before its expiry
	m.learn(bucketRef, 0, image(t, near), 2, T, 0, nil)
	if !m.trustsCount(bucketRef, 2, T+5*60_000) || m.trustsCount(bucketRef, 2, T+6*60_000) {
		t.Fatalf("an image 10 minutes before its ttl (%d s) vouches past 5 minutes before it", ttl)
	}
	m.learn(bucketRef, 0, image(t, zero), 2, T, 0, nil)
	m.learn(bucketRef, 1, nil, 4, T+1, 0, nil) // another shard shows 4
	if !m.trustsCount(bucketRef, 4, T+2) {
		t.Fatal("a doubling learned from shard 1 is not trusted while shard 0 is vouched for")
	}
	if m.trustsCount(bucketRef, 4, T+25*60_000) {
		t.Fatal("a doubling learned from shard 1 is trusted after shard 0's image stopped vouching")
	}
	if !m.trustsCount(bucketRef, 1, T+2) {
		t.Fatal("one shard needs no image of shard 0")
	}
}
