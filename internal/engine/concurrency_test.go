package engine

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// inflight2 is a cap of 2 leases in flight with a TTL of 60 s (epochs of
// 15 s).
var inflight2 = Limit{Name: "inflight", Limit: bucket.Limit{Capacity: 2000, Burst: 2000}, TTL: 60_000}

// capPlan is the plan of an acquire of one slot of cap beside rps10.
func capPlan(cap Limit) *Plan {
	return NewPlan(bucketRef, []Limit{rps10, cap}, map[string]int64{"rps": 1, cap.Name: 1})
}

// acquireOn runs one acquire of p by a process of memory m on st at now.
func acquireOn(t *testing.T, st *memsim.Store, m *Memory, p *Plan, now int64) (*Charge, Step, []Path) {
	t.Helper()
	c := NewCharge(m, p, newRand(1), Options{})
	s, paths := drive(st, func() int64 { return now }, c.Start(now), c.Feed)
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	return c, s, paths
}

// release runs the release of what c's acquire charged of its caps at now.
func release(t *testing.T, st *memsim.Store, m *Memory, c *Charge, now int64) []Path {
	t.Helper()
	p := c.p.Settling(c.Img, c.At)
	amts := map[string]int64{}
	for i := range p.caps {
		amts[p.caps[i].name] = -p.caps[i].amount
	}
	a := NewAdjust(m, p.WithAmounts(amts), c.Shard, c.N)
	s, paths := drive(st, func() int64 { return now }, a.Start(now), a.Feed)
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	return paths
}

func lv(t *testing.T, st *memsim.Store, shard int) int64 {
	t.Helper()
	return attr(t, st, bucketRef, shard, "c_inflight_lv")
}

// Every write an acquire can make carries the cap's part: a path that left
// it out would admit a lease above the cap, or charge the rates and not
// the cap. A new path must be added here.
func TestEveryAcquireWriteCarriesTheCap(t *testing.T) {
	p := capPlan(inflight2)
	full := image(t, shape{rf: T - 10_000}.item(p))
	held := holdItem(p, shape{rf: T - 10_000}, 1, T-100, map[string]int64{"rps": 1000})
	other := image(t, shape{rf: T - 10_000}.item(NewPlan(bucketRef, []Limit{rps10}, nil)))
	names := func(ex store.Expr, err error) []string {
		if err != nil {
			t.Fatal(err)
		}
		return slices.Collect(maps.Values(ex.Names))
	}
	for what, got := range map[string][]string{
		"speculative":           names(p.speculative(full, 1, T, nil, false)),
		"speculative, no image": names(p.speculative(nil, 1, T, nil, false)),
		"full":                  names(p.full(full, 1, T, 0)),
		"full on held":          names(p.fullHeld(held, 1, T, 0)),
		"normal":                names(p.normal(full, 1, T, true, nil)),
		"normal, new limits":    names(p.normal(other, 1, T, true, nil)),
	} {
		if !slices.Contains(got, "c_inflight_lv") {
			t.Errorf("%s: the write names %v, not the cap's c_inflight_lv", what, got)
		}
	}
	if it := p.create(0, 1, T).Item; it["c_inflight_lv"] != store.Int(1) {
		t.Errorf("create: c_inflight_lv = %v, want 1 (the acquire's slot)", it["c_inflight_lv"])
	}
	if it := p.create(1, 2, T).Item; it["c_inflight_lv"] != store.Int(1) {
		t.Errorf("create of shard 1 of 2: c_inflight_lv = %v, want 1 (its share, phantoms)", it["c_inflight_lv"])
	}
}

// Two processes each hold a lease and die. A third process, which never
// saw the bucket, acquires after the TTL and a quarter: its blind write
// guesses the ring and fails, and the write the returned item calls for
// retires the dead slots and takes its own, in one write. Before the TTL,
// the dead slots still count: it is refused, and charged nothing.
func TestDeadHoldersSlotsAreRetiredByTheNextAcquire(t *testing.T) {
	st := sim(t)
	p := capPlan(inflight2)
	acquireOn(t, st, NewMemory(16), p, T)
	acquireOn(t, st, NewMemory(16), p, T+1)
	rpsBefore := attr(t, st, bucketRef, 0, "b_rps_tk")
	_, s, _ := acquireOn(t, st, NewMemory(16), p, T+59_999)
	if s.Refused == nil {
		t.Fatalf("a third lease within the TTL: %q; want refused", describe(s))
	}
	if got := attr(t, st, bucketRef, 0, "b_rps_tk"); got != rpsBefore {
		t.Fatalf("the refusal took %d millitokens of rps", rpsBefore-got)
	}
	_, s, paths := acquireOn(t, st, NewMemory(16), p, T+75_000)
	if !s.Done || len(paths) != 2 {
		t.Fatalf("after TTL + E: %q via %v; want done in two writes (a guess, then the retiring write)", describe(s), paths)
	}
	if got := lv(t, st, 0); got != 1 {
		t.Fatalf("live %d; want 1 (the dead slots retired, the new one counted)", got)
	}
}

// Two processes hold the same image of a ring with a slot to retire. The
// first retires it; the second's write, made from the same image, must
// not retire it again (lv would lose the first's lease): the condition
// pins the retired slot's tag and count, so it fails, and the write the
// returned item calls for only adds.
func TestAStaleImageCannotRetireASlotTwice(t *testing.T) {
	st := sim(t)
	p := capPlan(inflight2)
	acquireOn(t, st, NewMemory(16), p, T) // its holder dies
	ma, mb := NewMemory(16), NewMemory(16)
	for _, m := range []*Memory{ma, mb} {
		knows(t, m, bucketRef, st.Peek(bucketRef.WithShard(0).Key()), 1, T)
	}
	now := T + 80_000
	if _, s, paths := acquireOn(t, st, ma, p, now); !s.Done || len(paths) != 1 {
		t.Fatalf("first: %q via %v; want one write", describe(s), paths)
	}
	if _, s, paths := acquireOn(t, st, mb, p, now); !s.Done || len(paths) != 2 {
		t.Fatalf("second, from the same image: %q via %v; want a failed write, then one that adds", describe(s), paths)
	}
	if got := lv(t, st, 0); got != 2 {
		t.Fatalf("live %d; want 2 (both new leases, the dead one retired once)", got)
	}
}

// A release gives its slot back with one write while the slot is in the
// ring; once the slot left it (the lease outlived its TTL and a quarter),
// the release makes no write: a write then would give back another
// lease's slot.
func TestAReleaseAfterItsSlotLeftTheRingWritesNothing(t *testing.T) {
	st := sim(t)
	p := capPlan(inflight2)
	m := NewMemory(16)
	a, _, _ := acquireOn(t, st, m, p, T)
	b, _, _ := acquireOn(t, st, m, p, T+1)
	if paths := release(t, st, m, a, T+30_000); len(paths) != 1 || lv(t, st, 0) != 1 {
		t.Fatalf("release within the TTL: %v, live %d; want one write, live 1", paths, lv(t, st, 0))
	}
	acquireOn(t, st, m, p, T+90_000) // retires b's slot, takes one
	if paths := release(t, st, m, b, T+90_001); len(paths) != 0 {
		t.Fatalf("release after the slot left the ring: %v; want no write", paths)
	}
	if got := lv(t, st, 0); got != 1 {
		t.Fatalf("live %d; want 1", got)
	}
}

// A shard a doubling makes starts with its share of the cap taken by
// phantoms, counted at least TTL + E: the leases of the older shards,
// admitted at the old share, may still live, and a new shard admitting at
// once would let the live leases exceed N.
func TestANewShardStartsFullOfPhantomsUntilTheOldLeasesAreDead(t *testing.T) {
	cap4 := Limit{Name: "inflight", Limit: bucket.Limit{Capacity: 4000, Burst: 4000}, TTL: 60_000}
	p := capPlan(cap4)
	it := p.create(1, 2, T).Item
	im := image(t, it)
	if p.capsShort(im, 2, T) == false || p.capsShort(im, 2, T+60_000+14_999) == false {
		t.Fatal("a new shard admits within TTL + E of its creation")
	}
	if p.capsShort(im, 2, T+90_000) {
		t.Fatal("a new shard's phantoms still count after TTL + 2E")
	}
}

// On a bucket of several shards, an acquire charges a cap on another shard
// only with an item of shard 0 from the cap's last epoch: a process whose
// count is older could be one from before a doubling, and would admit at
// the old share after the new shards' phantoms are gone.
func TestACapOnShardsNeedsARecentShardZero(t *testing.T) {
	p := capPlan(inflight2)
	m := NewMemory(16)
	ref := bucketRef
	zero := shape{n: 2, rf: T}.item(p)
	heard(t, m, ref, zero, 2, T)
	if p.capNeedsShardZero(m, 2, T+14_999) {
		t.Fatal("shard 0 seen within the epoch, yet needed")
	}
	if !p.capNeedsShardZero(m, 2, T+15_000) {
		t.Fatal("shard 0 last seen an epoch ago, yet not needed")
	}
	if p.WithAmounts(nil).capNeedsShardZero(m, 2, T+15_000) || p.capNeedsShardZero(m, 1, T+15_000) {
		t.Fatal("needed without a cap charged, or on one shard")
	}
}

// A bucket charged by speculative writes only (its rates never full, never
// refilled under the lock) keeps the expiry its last full or normal write
// set. A cap's slots must outlive the item, or DynamoDB would delete it
// with leases in flight and the next acquire would find every slot free:
// the speculative write pushes the expiry past its slot, once, on the
// condition that no other writer pushed it since its image.
func TestASpeculativeCapWritePushesTheExpiryPastItsSlot(t *testing.T) {
	p := capPlan(inflight2)
	it := shape{rf: T - 10_000}.item(p)
	it[store.AttrTTL] = store.Int(T / 1000) // expires now
	ex, err := p.speculative(image(t, it), 1, T, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(slices.Collect(maps.Values(ex.Names)), store.AttrTTL) {
		t.Fatalf("the write leaves the expiry alone: %s", ex.Update)
	}
	it[store.AttrTTL] = store.Int(p.capExpiry(T))
	if ex, _ = p.speculative(image(t, it), 1, T, nil, false); slices.Contains(slices.Collect(maps.Values(ex.Names)), store.AttrTTL) {
		t.Fatalf("the write pushes an expiry that covers its slot: %s", ex.Update)
	}
}

// A bucket with a cap is made by the Put (create), never by a first write
// that creates its item (orCreate): that write would leave the ring
// without its epochs, and every later write would fail on them.
func TestABucketWithACapIsMadeByThePut(t *testing.T) {
	if capPlan(inflight2).createsInOne() {
		t.Fatal("a plan with a cap creates its bucket in the first write")
	}
	st := sim(t)
	if _, _, paths := acquireOn(t, st, NewMemory(16), capPlan(inflight2), T); !slices.Contains(paths, PathCreate) {
		t.Fatalf("the first acquire went %v; want the Put (create)", paths)
	}
	for i := range ringSize {
		attr(t, st, bucketRef, 0, capAttr("inflight", "e"+string(rune('0'+i))))
	}
}

// A writer that still uses the shard count from before a doubling, with
// its image of shard 0 older than the cap's epoch, must not charge the cap
// on an old shard no writer at the new count has touched since: that
// shard's item still says the old count, so the write's shard_count
// condition holds, and the writer would admit the old share there (2 of 4
// slots at 2 shards; 1 at 4) while the other shards, their phantoms long
// gone, are full at the new share: 5 live leases for a cap of 4. The
// writer goes to shard 0 first: its count condition fails there, and the
// returned item teaches the writer the count in force.
func TestAWriterWithAStaleShardCountCannotOverAdmitTheCap(t *testing.T) {
	cap4 := Limit{Name: "inflight", Limit: bucket.Limit{Capacity: 4000, Burst: 4000}, TTL: 60_000}
	p := capPlan(cap4)
	old := T - 200_000 // the doubling from 2 to 4 shards, and the new shards' creation: phantoms gone
	zero := shape{shard: 0, n: 4, rf: old}.item(p)
	st := sim(t, zero,
		shape{shard: 1, n: 2, rf: old}.item(p), // an old shard, not written since the doubling
		shape{shard: 2, n: 4, rf: old}.item(p),
		shape{shard: 3, n: 4, rf: old}.item(p))
	now := T

	// A writer at 4 shards fills shards 0, 2 and 3, one slot (its share) each.
	m4 := NewMemory(16)
	heard(t, m4, bucketRef, zero, 4, now)
	for _, shard := range []int{0, 2, 3} {
		c := NewCharge(m4, p, picks(shard), Options{})
		s, _ := drive(st, func() int64 { return now }, c.Start(now), c.Feed)
		if !s.Done || c.Shard != shard {
			t.Fatalf("the writer at 4 shards on shard %d: %q on shard %d; want admitted there", shard, describe(s), c.Shard)
		}
	}

	// The stale writer saw shard 0 at 2 shards before the doubling; its
	// count is still vouched for, but its image is older than an epoch. It
	// draws shard 1 (at 2 shards, a share of 2 slots) for each acquire.
	stale := NewMemory(16)
	heard(t, stale, bucketRef, shape{shard: 0, n: 2, rf: old - 10_000}.item(p), 2, old-10_000)
	vouch(stale, bucketRef, now-1000)
	for i := range 2 {
		c := NewCharge(stale, p, picks(1, 1, 1, 1), Options{})
		first := c.Start(now)
		if i == 0 && !strings.HasPrefix(describe(first), "update 0 ") {
			t.Errorf("the stale writer's first write: %q; want one to shard 0", describe(first))
		}
		s, paths := drive(st, func() int64 { return now }, first, c.Feed)
		if s.Err != nil {
			t.Fatal(s.Err)
		}
		t.Logf("stale writer's acquire %d: %q via %v", i+1, describe(s), paths)
	}
	if n, _ := stale.begin(bucketRef, now); n != 4 {
		t.Errorf("the stale writer still counts %d shards; want 4, learned from shard 0", n)
	}

	live := int64(0)
	c := &p.caps[0]
	for shard := range 4 {
		r, _ := image(t, st.Peek(bucketRef.WithShard(shard).Key())).ring(c)
		live += r.live(c.epoch(now))
	}
	if live > 4 {
		t.Fatalf("%d live leases for a cap of 4: the stale writer admitted at the old share on an old shard", live)
	}
}
