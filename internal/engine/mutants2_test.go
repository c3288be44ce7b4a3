package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

// Story tests for mutants of internal/engine that lived through its other
// tests (see mutants_test.go); the equivalents are named at the end of
// this file.

// Pools hold half of a 10-token shard: its balance fills only to the
// other half, 5 tokens, and an empty shard is as full as it gets in 500
// ms at 10 a second. The views report that, not the second the whole
// burst would take (a reset the shard never reaches while the pools
// hold), and a request of 6 tokens, above what the shard can hold, gets
// no retry time: any wait promised would be refused again.
func TestAShardsViewsFillOnlyToWhatThePoolsLeave(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 6})
	img := holdItem(p, shape{rf: T, tk: map[string]int64{"rps": 0}}, 1, T-100, map[string]int64{"rps": 5000})
	v := p.Views(img, 1, T, false, true)[0]
	if v.ResetMs != 500 {
		t.Fatalf("full in %d ms; want 500, the pools' 5 tokens left out", v.ResetMs)
	}
	if !v.Exceeded || v.RetryMs != -1 {
		t.Fatalf("6 tokens of a shard that holds 5: exceeded %v, retry %d ms; want exceeded, no retry time (-1)", v.Exceeded, v.RetryMs)
	}
}

// A writer whose clock runs 300 ms ahead emptied the shard at its now:
// the item's rf is 300 ms past ours, and nothing refills before rf. A
// refusal at our now waits 400 ms for a token (the 300 ms to rf and the
// token's 100), and the shard is full in 1,300 ms: counted from our now,
// the caller would retry at 100 ms into a shard still empty.
func TestAShardRefilledAheadOfOurClockRefillsFromItsRf(t *testing.T) {
	p := plan1(bucketRef)
	img := image(t, shape{rf: T + 300, tk: map[string]int64{"rps": 0}}.item(p))
	v := p.Views(img, 1, T, false, true)[0]
	if v.RetryMs != 400 || v.ResetMs != 1300 {
		t.Fatalf("retry after %d ms, full in %d ms; want 400 and 1300 (nothing refills before rf)", v.RetryMs, v.ResetMs)
	}
}

// An Adjust above the estimate left the day's quota in debt on the shard
// (half a request below zero). A request that charges only the rate, none
// of the quota, is not the quota's to refuse: the process neither refuses
// it locally nor after its write lost a race and returned the
// item in debt, and the write leaves the quota as it was.
func TestARequestThatChargesNoneOfAQuotaInDebtIsAdmitted(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1})
	debt := dayItem(p, 0, 1, T, -500, 1)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, debt, 1, T+1000)
	st := sim(t, debt)
	c := NewCharge(m, p, picks(0), Options{})
	if s := run(t, st, c, c.Start(T+1000), T+1000); !s.Done || s.Refused != nil {
		t.Fatalf("the acquire ends %q, want admitted", describe(s))
	}
	if left := attr(t, st, bucketRef, 0, "q_req_tk"); left != -500 {
		t.Fatalf("the quota holds %d, want its -500 untouched", left)
	}
	// The same after a lost race: the item the failed write returns shows
	// the debt, and the acquire writes again.
	c = NewCharge(m, p, picks(0), Options{})
	s := c.Start(T + 2000)
	raced := shape{rf: T + 1500, tk: map[string]int64{"rps": 0}}.item(p)
	raced["q_req_ws"], raced["q_req_tk"], raced["q_req_sc"] = debt["q_req_ws"], debt["q_req_tk"], debt["q_req_sc"]
	if s = c.Feed(failed(raced), T+2000); !strings.HasPrefix(describe(s), "update 0 ") {
		t.Fatalf("after the lost race: %q, want a write again", describe(s))
	}
}

// A quota of 800 requests a day is added to a bucket that had only its
// rate. The first acquire under the new limits brings the item to them
// and writes the quota whole: the day it is in, N, what is left, what was
// consumed and the shard count it started the day at. Without the day the
// item reads as not having the quota (the next acquire would start it
// again at N); without N or the total consumed the item would not decode,
// or usage would miss the charge; without the count, a shard a doubling
// makes today would hold nothing of the day.
func TestAQuotaNewToABucketIsWrittenWholeByItsFirstAcquire(t *testing.T) {
	old := NewPlan(bucketRef, []Limit{perSecond("rps", 100)}, nil)
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1, "req": 1})
	it := shape{rf: T - 1000}.item(old)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, it, 1, T-1000)
	st := sim(t, it)
	for i, now := range []int64{T + 1000, T + 2000} {
		c := NewCharge(m, p, picks(0, 0), Options{})
		if s := run(t, st, c, c.Start(now), now); !s.Done || s.Refused != nil {
			t.Fatalf("acquire %d ends %q, want admitted", i+1, describe(s))
		}
	}
	for name, want := range map[string]int64{"q_req_ws": T, "q_req_cp": 800_000, "q_req_tk": 800_000 - 2000, "q_req_tc": 2000, "q_req_sc": 1} {
		if got := attr(t, st, bucketRef, 0, name); got != want {
			t.Errorf("%s = %d after two acquires, want %d", name, got, want)
		}
	}
}

// Just after midnight, on a bucket of 2 shards both still in yesterday's
// day of the quota, a request that charges only the rate goes to shard
// 1. It has nothing to do with the quota's new day (which only shard 0
// starts, for a request that charges it), and its one write lands: it
// does not wait for a window it does not charge.
func TestARequestThatChargesNoneOfAQuotaWritesAnyShardAtMidnight(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1})
	yesterday := T - day
	zero, one := dayItem(p, 0, 2, yesterday, 0, 2), dayItem(p, 1, 2, yesterday, 0, 0)
	zero[attrRefill], one[attrRefill] = store.Int(T-500), store.Int(T-500)
	st := sim(t, zero, one)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, zero, 2, T-500)
	knows(t, m, bucketRef, one, 2, T-500)
	vouch(m, bucketRef, T-500)
	c := NewCharge(m, p, picks(1), Options{})
	s := c.Start(T + 100)
	if got := describe(s); !strings.HasPrefix(got, "update 1 ") {
		t.Fatalf("first step %q, want a write to shard 1", got)
	}
	if s = c.Feed(exec(t, st, s), T+100); !s.Done || s.Refused != nil {
		t.Fatalf("after the write: %q, want admitted by it", describe(s))
	}
}

// A bucket of 2 shards whose day of 800 requests starts now: each shard
// starts it with 400. A request of 500 is more than any shard holds of the
// day, and the process, whose image of shard 0 is too old to refuse on,
// writes: the write must not start the day at 400 less 500 (a shard in
// debt from its first request, 100 over its share) but fail, and the
// acquire is refused with shard 0 still in yesterday.
func TestARequestAboveAShardsShareOfTheDayDoesNotStartIt(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1, "req": 500})
	yesterday := T - day
	zero, one := dayItem(p, 0, 2, yesterday, 0, 2), dayItem(p, 1, 2, yesterday, 0, 0)
	zero[attrRefill], one[attrRefill] = store.Int(T-5000), store.Int(T-5000)
	st := sim(t, zero, one)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, zero, 2, T-5000)
	vouch(m, bucketRef, T-5000)
	c := NewCharge(m, p, picks(0, 1), Options{})
	if s := run(t, st, c, c.Start(T+100), T+100); s.Refused == nil {
		t.Fatalf("the acquire ends %q, want refused", describe(s))
	}
	if ws := attr(t, st, bucketRef, 0, "q_req_ws"); ws != yesterday {
		t.Fatalf("shard 0's day starts at %d, want yesterday's %d: the request started the day", ws, yesterday)
	}
}

// A process whose clock runs ahead started tomorrow on the bucket a
// second before our midnight. Our acquire, at our today, charges the day
// the item is in: its write is conditional on tomorrow's start, lands at
// once, and takes the request from tomorrow's share.
func TestAnAcquireChargesTheDayAClockAheadStarted(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1, "req": 1})
	tomorrow := T + day
	it := dayItem(p, 0, 1, tomorrow, 700_000, 1)
	it[attrRefill] = store.Int(tomorrow - 2000)
	st := sim(t, it)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, it, 1, tomorrow-1500)
	c := NewCharge(m, p, picks(0), Options{})
	s := c.Start(tomorrow - 1000)
	if s = c.Feed(exec(t, st, s), tomorrow-1000); !s.Done || s.Refused != nil {
		t.Fatalf("after the first write: %q, want admitted by it", describe(s))
	}
	if left := attr(t, st, bucketRef, 0, "q_req_tk"); left != 699_000 {
		t.Fatalf("tomorrow holds %d, want 699000 (the request taken from it)", left)
	}
}

// The process last saw plenty of the day's quota left, and other
// processes spent it since: the shard holds half a request. The blind
// write must fail on the quota's floor, and the acquire is refused, the
// shard's half request untouched: a write without the floor would admit
// the request and leave the day in debt, over its quota.
func TestABlindWriteOnADaySpentSinceTheImageIsRefused(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1, "req": 1})
	seen := dayItem(p, 0, 1, T, 100_000, 1)
	seen[attrRefill] = store.Int(T + 1000)
	spent := dayItem(p, 0, 1, T, 500, 1)
	spent[attrRefill] = store.Int(T + 1000)
	st := sim(t, spent)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, seen, 1, T+1000)
	c := NewCharge(m, p, picks(0), Options{})
	if s := run(t, st, c, c.Start(T+1100), T+1100); s.Refused == nil {
		t.Fatalf("the acquire ends %q, want refused", describe(s))
	}
	if left := attr(t, st, bucketRef, 0, "q_req_tk"); left != 500 {
		t.Fatalf("the day holds %d, want its 500 untouched", left)
	}
}

// Midnight of 1 January, on a bucket with a quota of 800 requests a day
// and one of 100 euros a month. Two processes hold the same image of the
// bucket from before midnight and each acquires just after it. The first
// write starts the new day and month (their totals consumed count its
// charge) and pushes the item's expiry past the month's end: expiring an
// hour after the day's end, the item would take the month's count with
// it, and the month would start again at 100. The second write, from
// the same image, must not start them again over the first's charge: it
// fails, sees the new windows, and charges them beside the first.
func TestTwoWritersAtMidnightStartTheDayOnce(t *testing.T) {
	eurMonth := Limit{Name: "eur", Limit: usdMonth.Limit, Calendar: usdMonth.Calendar}
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay, eurMonth}, map[string]int64{"rps": 1, "req": 1, "eur": 1})
	yesterday, lastMonth := T-day, T-31*day
	it := shape{rf: T - 500, tk: map[string]int64{"rps": 0}}.item(p)
	it["q_req_ws"], it["q_req_tk"], it["q_eur_ws"], it["q_eur_tk"] = store.Int(yesterday), store.Int(0), store.Int(lastMonth), store.Int(0)
	st := sim(t, it)
	tc, _ := it.Int("q_req_tc")
	for i := range 2 {
		m := speculating(NewMemory(0))
		knows(t, m, bucketRef, it, 1, T-500)
		c := NewCharge(m, p, picks(0, 0), Options{})
		if s := run(t, st, c, c.Start(T+100), T+100); !s.Done || s.Refused != nil {
			t.Fatalf("acquire %d ends %q, want admitted", i+1, describe(s))
		}
	}
	if left := attr(t, st, bucketRef, 0, "q_req_tk"); left != 800_000-2000 {
		t.Errorf("the day holds %d, want 798000: both requests taken from it", left)
	}
	if got := attr(t, st, bucketRef, 0, "q_req_tc"); got != tc+2000 {
		t.Errorf("the day's total consumed %d, want %d: both charges counted", got, tc+2000)
	}
	feb := (T + 31*day) / 1000
	if exp := attr(t, st, bucketRef, 0, store.AttrTTL); exp < feb+3600 {
		t.Errorf("the item expires at %d, before the month's end and an hour (%d)", exp, feb+3600)
	}
}

// The first acquire of 1 January on a key makes its bucket, with a quota
// of 800 requests a day and one of 100 euros a month. The new item holds
// each quota whole (N and the total consumed, which usage reads, beside
// what is left and the window) and lives past the month's end: expiring
// an hour after the day, it would take the month's count with it.
func TestABucketMadeAtMidnightHoldsItsQuotasForTheMonth(t *testing.T) {
	eurMonth := Limit{Name: "eur", Limit: usdMonth.Limit, Calendar: usdMonth.Calendar}
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay, eurMonth}, map[string]int64{"rps": 1, "req": 1, "eur": 2})
	it := p.create(0, 1, T+100).Item
	for name, want := range map[string]int64{"q_req_cp": 800_000, "q_req_tc": 1000, "q_eur_cp": 100_000, "q_eur_tc": 2000} {
		if got, _ := it.Int(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	feb := (T + 31*day) / 1000
	if exp, _ := it.Int(store.AttrTTL); exp < feb+3600 {
		t.Errorf("the item expires at %d, before the month's end and an hour (%d)", exp, feb+3600)
	}
}

// An acquire whose write returned no item reports the limits as its
// image showed them less its own charge: 5 requests left of the day
// before it, 4 after. Reported at 5, a caller pacing itself on
// Remaining would count a request the day no longer holds.
func TestAViewAfterAChargeCountsItOnTheQuota(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1, "req": 1})
	img := image(t, dayItem(p, 0, 1, T, 5000, 1))
	for _, v := range p.Views(img, 1, T+1000, true, false) {
		if v.Name == "req" && v.Remaining != 4000 {
			t.Fatalf("the day's remaining %d millitokens after the charge, want 4000", v.Remaining)
		}
	}
}

// A cap of 2 leases in flight is added to a bucket that had only its
// rate. The first acquire under the new limits writes the cap's ring
// whole (N, every slot's count and epoch, its own slot taken: once each, as
// DynamoDB requires of an expression; the write that set its slot's count
// twice was refused, and so was every acquire of the bucket) and the next
// acquire takes the second slot. After the TTL and a quarter the first
// two leases are dead: an acquire then retires their slots, which its
// write's condition pins as the ring shows them, and is admitted.
func TestACapNewToABucketIsWrittenWholeByItsFirstAcquire(t *testing.T) {
	old := NewPlan(bucketRef, []Limit{rps10}, nil)
	p := capPlan(inflight2)
	st := sim(t, shape{rf: T - 1000}.item(old))
	m := NewMemory(16)
	acquireOn(t, st, m, p, T)
	if _, s, _ := acquireOn(t, st, m, p, T+1); !s.Done || s.Refused != nil || lv(t, st, 0) != 2 {
		t.Fatalf("the second acquire: %q, live %d; want admitted, live 2", describe(s), lv(t, st, 0))
	}
	for i := range ringSize {
		attr(t, st, bucketRef, 0, capAttr("inflight", "n"+string(rune('0'+i))))
	}
	if got := attr(t, st, bucketRef, 0, "c_inflight_cp"); got != 2 {
		t.Fatalf("the cap's N on the item: %d, want 2", got)
	}
	if _, s, _ := acquireOn(t, st, m, p, T+80_000); !s.Done || s.Refused != nil || lv(t, st, 0) != 1 {
		t.Fatalf("after the TTL and a quarter: %q, live %d; want admitted, live 1", describe(s), lv(t, st, 0))
	}
}

// A lease acquired at T by a process whose clock then runs behind is
// released at what that clock calls T+74 s, when its slot is still in
// the ring. Another process, its clock ahead, already made the acquire of
// T+76 s, which retired the slot (the lease was older than the TTL and a
// quarter by its clock) and counted its own lease there. The release must
// not give back the new lease's slot: its write is conditional on the
// slot's epoch being the one it charged, fails, and the cap keeps the new
// lease counted.
func TestAReleaseLateByItsClockDoesNotFreeTheNextLeasesSlot(t *testing.T) {
	st := sim(t)
	p := capPlan(inflight2)
	m := NewMemory(16)
	a, _, _ := acquireOn(t, st, m, p, T)
	if _, s, _ := acquireOn(t, st, NewMemory(16), p, T+76_000); !s.Done || s.Refused != nil {
		t.Fatalf("the acquire of T+76 s: %q, want admitted", describe(s))
	}
	release(t, st, m, a, T+74_000)
	if got := lv(t, st, 0); got != 1 {
		t.Fatalf("live %d after the late release; want 1 (the new lease)", got)
	}
}

// Two processes hold the same image of a bucket with a cap, whose expiry
// is closer than the cap's ring needs, and acquire at once by the
// consumption-only write. The first pushes the expiry past its slot; the
// second, pushing from the same image, must not push again on top of it
// (each such pair of writers would drive the expiry ever later, and the
// item would outlive its use by as many pushes): its push is conditional
// on the expiry it saw, so its write fails and the next one, from the
// returned item, finds the expiry pushed.
func TestTwoWritersFromOneImagePushTheCapsExpiryOnce(t *testing.T) {
	p := capPlan(inflight2)
	it := shape{rf: T + 1000, tk: map[string]int64{"rps": 5000}}.item(p)
	it[store.AttrTTL] = store.Int(T/1000 + 100)
	st := sim(t, it)
	for i := range 2 {
		m := speculating(NewMemory(0))
		knows(t, m, bucketRef, it, 1, T+1000)
		c := NewCharge(m, p, picks(0, 0), Options{})
		if s := run(t, st, c, c.Start(T+1100), T+1100); !s.Done || s.Refused != nil {
			t.Fatalf("acquire %d ends %q, want admitted", i+1, describe(s))
		}
	}
	if exp, want := attr(t, st, bucketRef, 0, store.AttrTTL), p.capExpiry(T+1100); exp != want {
		t.Fatalf("the item expires at %d, want %d: the cap's need, pushed once", exp, want)
	}
}

// A lease acquired at T, its holder dead, counts in the slot of T's epoch
// until the ring turns back to that slot. Two processes hold the same
// image of the bucket and acquire at once when it has: each write retires
// the dead lease's slot and counts its own lease there. The first lands;
// the second, made from the same image, finds the slot's count as it saw
// it (the first put its own lease there, 1 again) but the slot's epoch
// moved on: its condition on the epoch fails it, and the write the
// returned item calls for only adds. Retiring again would take the first
// lease out of the count (2 live, counted 1: a third would be admitted).
func TestASecondRetireOfASlotFailsOnItsEpochWhenTheCountLooksTheSame(t *testing.T) {
	p := capPlan(inflight2)
	c := &p.caps[0]
	now := T + 80_000
	e := c.epoch(now)
	it := shape{rf: now - 100, tk: map[string]int64{"rps": 5000}}.item(p)
	for j := range ringSize {
		it[c.cnt[j]], it[c.tag[j]] = store.Int(0), store.Int(turn(j, e-1))
	}
	it[c.cnt[slot(e-ringSize)]], it[c.lv] = store.Int(1), store.Int(1) // the dead lease
	st := sim(t, it)
	for i := range 2 {
		m := speculating(NewMemory(0))
		knows(t, m, bucketRef, it, 1, now-100)
		ch := NewCharge(m, p, picks(0, 0), Options{})
		if s := run(t, st, ch, ch.Start(now), now); !s.Done || s.Refused != nil {
			t.Fatalf("acquire %d ends %q, want admitted", i+1, describe(s))
		}
	}
	if got := lv(t, st, 0); got != 2 {
		t.Fatalf("live %d; want 2 (both new leases, the dead one retired once)", got)
	}
}

// Two leases were acquired at T, and the process that knows the bucket
// saw both counted in the slot of T's epoch. One's holder died; the
// other's, its clock behind, released it late (its slot still in the
// ring by that clock): the slot counts 1. When the ring turns back to
// that slot, the process's acquire retires it from its image: its
// condition on the count it saw (2) fails, and the write from the
// returned item retires the 1 that is there. Retiring the 2 it saw would
// take its own new lease out of the live count (0 live with a lease in
// flight: one lease over the cap later).
func TestARetireFailsOnACountALateReleaseLowered(t *testing.T) {
	p := capPlan(inflight2)
	c := &p.caps[0]
	now := T + 80_000
	e := c.epoch(now)
	seen := shape{rf: now - 100, tk: map[string]int64{"rps": 5000}}.item(p)
	for j := range ringSize {
		seen[c.cnt[j]], seen[c.tag[j]] = store.Int(0), store.Int(turn(j, e-1))
	}
	seen[c.cnt[slot(e-ringSize)]], seen[c.lv] = store.Int(2), store.Int(2)
	stored := maps.Clone(seen)
	stored[c.cnt[slot(e-ringSize)]], stored[c.lv] = store.Int(1), store.Int(1) // the late release
	st := sim(t, stored)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, seen, 1, now-100)
	ch := NewCharge(m, p, picks(0, 0), Options{})
	if s := run(t, st, ch, ch.Start(now), now); !s.Done || s.Refused != nil {
		t.Fatalf("the acquire ends %q, want admitted", describe(s))
	}
	if got := lv(t, st, 0); got != 1 {
		t.Fatalf("live %d; want 1 (the new lease)", got)
	}
}

// Two dead leases count in the slot of T's epoch. The acquire that
// retires them when the ring turns back to that slot leaves in it
// exactly its own lease: once that lease is dead in turn and its slot
// leaves the ring, the bucket counts no live lease, and its status shows
// the cap's 2 free slots, not 3 (the 2 retired counted out a second time,
// from a live count of 1).
func TestARetiredSlotCountsOnlyTheLeaseThatRetiredIt(t *testing.T) {
	p := capPlan(inflight2)
	c := &p.caps[0]
	now := T + 80_000
	e := c.epoch(now)
	it := shape{rf: now - 100, tk: map[string]int64{"rps": 5000}}.item(p)
	for j := range ringSize {
		it[c.cnt[j]], it[c.tag[j]] = store.Int(0), store.Int(turn(j, e-1))
	}
	it[c.cnt[slot(e-ringSize)]], it[c.lv] = store.Int(2), store.Int(2)
	st := sim(t, it)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, it, 1, now-100)
	ch := NewCharge(m, p, picks(0, 0), Options{})
	if s := run(t, st, ch, ch.Start(now), now); !s.Done || s.Refused != nil {
		t.Fatalf("the acquire ends %q, want admitted", describe(s))
	}
	later := now + ringSize*c.epochLen()
	im := image(t, st.Peek(bucketRef.WithShard(0).Key()))
	if free, _, _ := p.Total("inflight", []*Image{im}, 1, later); free != 2000 {
		t.Fatalf("%d millitokens free once the new lease's slot left the ring; want the cap's 2000", free)
	}
}

// Dead leases count in two slots, of T's epoch and of the next. An
// acquire two epochs after the ring turned back to T's slot retires both:
// its own lease goes in its slot, and the other slot, now counting a
// later epoch with no lease, counts 0. Kept at its dead lease's 1, that
// slot would be counted out a second time when it leaves the ring again:
// the status would show 3 free slots of a cap of 2.
func TestASlotRetiredBesideTheAcquiresOwnCountsNothing(t *testing.T) {
	p := capPlan(inflight2)
	c := &p.caps[0]
	e0 := c.epoch(T)
	now := (e0 + ringSize + 1) * c.epochLen()
	it := shape{rf: now - 100, tk: map[string]int64{"rps": 5000}}.item(p)
	for j := range ringSize {
		it[c.cnt[j]], it[c.tag[j]] = store.Int(0), store.Int(turn(j, e0+ringSize-1))
	}
	it[c.cnt[slot(e0)]], it[c.cnt[slot(e0+1)]], it[c.lv] = store.Int(1), store.Int(1), store.Int(2)
	st := sim(t, it)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, it, 1, now-100)
	ch := NewCharge(m, p, picks(0, 0), Options{})
	if s := run(t, st, ch, ch.Start(now), now); !s.Done || s.Refused != nil || lv(t, st, 0) != 1 {
		t.Fatalf("the acquire ends %q, live %d; want admitted, live 1", describe(s), lv(t, st, 0))
	}
	later := now + ringSize*c.epochLen()
	im := image(t, st.Peek(bucketRef.WithShard(0).Key()))
	if free, _, _ := p.Total("inflight", []*Image{im}, 1, later); free != 2000 {
		t.Fatalf("%d millitokens free once every slot left the ring; want the cap's 2000", free)
	}
}

// A process that has no image of a bucket with a cap acquires by the
// write that guesses the ring: the slot of now is current. On a bucket
// whose ring is current, the write counts the lease in that slot and in
// the live count, and lands. On one whose slot of now still counts a
// dead lease of five epochs ago, the guess is wrong: the write fails on
// the slot's epoch, and the write the returned item calls for retires the
// dead lease. Added to the old slot, the lease would count beside the
// dead one, and the cap would refuse the next lease while one lives.
func TestAnAcquireWithoutAnImageCountsItsLeaseInTheSlotOfNow(t *testing.T) {
	p := capPlan(inflight2)
	c := &p.caps[0]
	now := T + 80_000
	e := c.epoch(now)
	for _, tc := range []struct {
		name   string
		ring   int64 // the epoch the ring last turned to
		wantLv int64
	}{{"current ring", e, 2}, {"slot of now five epochs old", e - 1, 1}} {
		it := shape{rf: now - 100, tk: map[string]int64{"rps": 5000}}.item(p)
		for j := range ringSize {
			it[c.cnt[j]], it[c.tag[j]] = store.Int(0), store.Int(turn(j, tc.ring))
		}
		it[c.cnt[slot(e-1)]], it[c.lv] = store.Int(1), store.Int(1) // a lease of the last epoch, alive
		if tc.ring != e {
			it[c.cnt[slot(e-1)]], it[c.cnt[slot(e)]] = store.Int(0), store.Int(1) // dead instead, in the slot of e-5
		}
		st := sim(t, it)
		ch := NewCharge(speculating(NewMemory(0)), p, picks(0, 0), Options{})
		if s := run(t, st, ch, ch.Start(now), now); !s.Done || s.Refused != nil {
			t.Fatalf("%s: the acquire ends %q, want admitted", tc.name, describe(s))
		}
		if got := lv(t, st, 0); got != tc.wantLv {
			t.Fatalf("%s: live %d; want %d", tc.name, got, tc.wantLv)
		}
		if got := attr(t, st, bucketRef, 0, c.cnt[slot(e)]); got != 1 {
			t.Fatalf("%s: the slot of now counts %d; want the new lease's 1", tc.name, got)
		}
	}
}

// A cap of 2 with one lease live. Two processes hold that image and
// acquire at once: the first takes the second slot; the second's write,
// from the same image, must fail on the live count (at most the share
// less its lease), and the acquire is refused: 3 leases live of a cap of 2
// otherwise.
func TestTwoAcquiresFromOneImageCannotPassTheCap(t *testing.T) {
	p := capPlan(inflight2)
	c := &p.caps[0]
	now := T + 1000
	e := c.epoch(now)
	it := shape{rf: now - 100, tk: map[string]int64{"rps": 5000}}.item(p)
	for j := range ringSize {
		it[c.cnt[j]], it[c.tag[j]] = store.Int(0), store.Int(turn(j, e))
	}
	it[c.cnt[slot(e)]], it[c.lv] = store.Int(1), store.Int(1)
	st := sim(t, it)
	var ends []string
	for range 2 {
		m := speculating(NewMemory(0))
		knows(t, m, bucketRef, it, 1, now-100)
		ch := NewCharge(m, p, picks(0, 0), Options{})
		ends = append(ends, describe(run(t, st, ch, ch.Start(now), now)))
	}
	if got := lv(t, st, 0); got != 2 || !strings.HasPrefix(ends[1], "refused") {
		t.Fatalf("the acquires end %q, live %d; want the second refused, live 2", ends, got)
	}
}

// The cap of a bucket is raised from 2 to 4 leases. The first acquire
// under the new limits records the new N on the item beside the ring, as
// it records every limit's configuration: the item says which N its
// counts were admitted under.
func TestAnAcquireUnderARaisedCapRecordsItsN(t *testing.T) {
	cap4 := Limit{Name: "inflight", Limit: bucket.Limit{Capacity: 4000, Burst: 4000}, TTL: 60_000}
	st := sim(t, shape{rf: T - 1000, tk: map[string]int64{"rps": 5000}}.item(capPlan(inflight2)))
	acquireOn(t, st, NewMemory(16), capPlan(cap4), T)
	if got := attr(t, st, bucketRef, 0, "c_inflight_cp"); got != 4 {
		t.Fatalf("the item's N: %d, want the raised 4", got)
	}
}

// capView is the view of the cap "inflight" of p on im at now.
func capView(t *testing.T, p *Plan, im *Image, now int64, charge, judge bool) View {
	t.Helper()
	for _, v := range p.Views(im, 1, now, charge, judge) {
		if v.Name == "inflight" {
			return v
		}
	}
	t.Fatal("no view of the cap")
	return View{}
}

// capRing is p's bucket at now - 100 with the cap's ring current at now's
// epoch and leases counted in the slots of the epochs ago given.
func capRing(t *testing.T, p *Plan, now int64, ago ...int64) *Image {
	t.Helper()
	c := &p.caps[0]
	e := c.epoch(now)
	it := shape{rf: now - 100, tk: map[string]int64{"rps": 5000}}.item(p)
	for j := range ringSize {
		it[c.cnt[j]], it[c.tag[j]] = store.Int(0), store.Int(turn(j, e))
	}
	for _, a := range ago {
		n, _ := it.Int(c.cnt[slot(e-a)])
		it[c.cnt[slot(e-a)]] = store.Int(n + 1)
	}
	it[c.lv] = store.Int(int64(len(ago)))
	return image(t, it)
}

// What a caller reads of a cap of 2 leases (TTL 60 s, epochs of 15 s) a
// second into an epoch: the free slots, when the oldest lease counted
// leaves the ring (the reset) and, for a refused request, when enough
// have left for it (the retry). A lease of two epochs ago leaves with the
// third epoch from now: 44 s.
func TestACapsViewsTellTheFreeSlotsAndWhenTheyFree(t *testing.T) {
	p := capPlan(inflight2)
	now := T + 1000
	// One lease live: a slot free, the lease leaves in 44 s.
	one := capRing(t, p, now, 2)
	if v := capView(t, p, one, now, false, true); v.Remaining != 1000 || v.ResetMs != 44_000 || v.Exceeded || v.RetryMs != 0 {
		t.Fatalf("one lease live: %+v; want 1000 free, reset in 44000 ms, not exceeded", v)
	}
	// The same image after this acquire's own write: its slot counted.
	if v := capView(t, p, one, now, true, false); v.Remaining != 0 {
		t.Fatalf("after the charge: %d free, want 0", v.Remaining)
	}
	// Full: refused, to retry when the older lease leaves; a status read
	// (not judged) has no retry.
	full := capRing(t, p, now, 2, 0)
	if v := capView(t, p, full, now, false, true); !v.Exceeded || v.RetryMs != 44_000 || v.ResetMs != 44_000 {
		t.Fatalf("full: %+v; want exceeded, retry and reset in 44000 ms", v)
	}
	if v := capView(t, p, full, now, false, false); v.RetryMs != 0 {
		t.Fatalf("full, not judged: retry %d, want 0", v.RetryMs)
	}
	// A request of 3 slots on a cap of 2 never fits: no retry time.
	three := NewPlan(bucketRef, []Limit{rps10, inflight2}, map[string]int64{"rps": 1, "inflight": 3})
	if v := capView(t, three, one, now, false, true); !v.Exceeded || v.RetryMs != -1 {
		t.Fatalf("3 slots of 2: %+v; want exceeded, retry -1", v)
	}
	// No lease counted: nothing to wait for.
	if v := capView(t, p, capRing(t, p, now), now, false, true); v.ResetMs != 0 || v.Remaining != 2000 {
		t.Fatalf("empty: %+v; want 2000 free, reset 0", v)
	}
}

// A cap's name, N or TTL changed in the configuration changes the limits
// hash the writes are conditional on: the blind writes then fail on items
// written under the old cap, and the write from the item returned brings
// it to the new one (its share, its ring). A hash blind to the cap would
// let an item keep admitting under the old N.
func TestAChangedCapChangesTheLimitsHash(t *testing.T) {
	with := func(c Limit) int64 { return capPlan(c).hash }
	base := with(inflight2)
	cap4 := inflight2
	cap4.Capacity, cap4.Burst = 4000, 4000
	longer := inflight2
	longer.TTL = 120_000
	renamed := inflight2
	renamed.Name = "jobs"
	for what, h := range map[string]int64{"N": with(cap4), "TTL": with(longer), "name": with(renamed), "no cap": plan1(bucketRef).hash} {
		if h == base {
			t.Errorf("a cap with another %s has the same limits hash", what)
		}
	}
	// Two caps whose N and TTL bytes are a permutation of each other's
	// (3 slots for 1,024 ms, 2 slots for 1,025 ms): the hash is of the
	// sequence, not of the set of bytes.
	a := Limit{Name: "inflight", Limit: bucket.Limit{Capacity: 3000, Burst: 3000}, TTL: 1024}
	b := Limit{Name: "inflight", Limit: bucket.Limit{Capacity: 2000, Burst: 2000}, TTL: 1025}
	if with(a) == with(b) {
		t.Error("3 slots for 1,024 ms and 2 slots for 1,025 ms have the same limits hash")
	}
}

// Making a lease's release plan from its acquire's leaves the acquire's
// plan an acquire: with both slots of the cap taken, the next acquire
// with it, by a process whose image of the bucket is too old to refuse
// on, is refused by the store (a plan pinned to the first lease's slot
// would add to it with no bound, as a release does, and admit a third
// lease).
func TestSettlingLeavesTheAcquiresPlanAnAcquire(t *testing.T) {
	st := sim(t)
	p := capPlan(inflight2)
	m := NewMemory(16)
	a, _, _ := acquireOn(t, st, m, p, T)
	acquireOn(t, st, m, p, T+1)
	_ = p.Settling(a.Img, a.At)
	other := NewMemory(16) // its image of the bucket too old to refuse on
	knows(t, other, bucketRef, st.Peek(bucketRef.WithShard(0).Key()), 1, T+2)
	if _, s, _ := acquireOn(t, st, other, p, T+1500); s.Refused == nil || lv(t, st, 0) != 2 {
		t.Fatalf("a third acquire: %q, live %d; want refused, live 2", describe(s), lv(t, st, 0))
	}
}

// A cap taken out of the configuration is taken out of the item by the
// next write under the new limits: its ring and counts, not left behind
// for a cap of that name added again later to find.
func TestARemovedCapLeavesTheItem(t *testing.T) {
	withCap := capPlan(inflight2)
	im := image(t, shape{rf: T - 10_000}.item(withCap))
	ex, err := plan1(bucketRef).normal(im, 1, T, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Collect(maps.Values(ex.Names))
	for _, a := range []string{"c_inflight_lv", "c_inflight_cp", "c_inflight_n0", "c_inflight_e4"} {
		if !slices.Contains(names, a) {
			t.Errorf("the write leaves %s on the item: %s", a, ex.Update)
		}
	}
}

// A bucket with two caps, of an hour's TTL and of a minute's: a write
// leaves the item's expiry past the longer cap's ring. Expiring with the
// shorter's, the item would forget the hour's leases while they live.
func TestAnItemOutlivesItsLongestCapsRing(t *testing.T) {
	hour := Limit{Name: "calls", Limit: bucket.Limit{Capacity: 2000, Burst: 2000}, TTL: 3_600_000}
	p := NewPlan(bucketRef, []Limit{rps10, hour, inflight2}, map[string]int64{"rps": 1, "calls": 1, "inflight": 1})
	c := &p.caps[0]
	if c.name != "calls" {
		t.Fatalf("caps in the order %q, ...; the test wants the hour's first", c.name)
	}
	want := expiryAt((c.epoch(T)+ringSize+1)*c.epochLen(), 0)
	if got := p.capExpiry(T); got < want {
		t.Fatalf("expiry %d, before the hour cap's ring leaves it (%d)", got, want)
	}
}

// Two writes of reservations under the rf lock (the normal write), on
// items with holds:
//   - a reservation that also releases what its pool handed out of the
//     holds it took in generation 4, on an item now in generation 5: its
//     write is conditional on generation 4 and fails (those holds went
//     with their generation; released from generation 5's, they would lift
//     the cap over tokens the new pools hold);
//   - a reservation on an item whose generation is over starts the next
//     one: it records when (hs = now: a generation lives GenLifeMs from
//     it), and sets its hold on rps only if no hold is there (one taken
//     meanwhile, in the generation this write ends, by a process whose
//     clock lags, must fail it, not be overwritten).
func TestAReservationsWriteKeepsToItsHoldGeneration(t *testing.T) {
	p := NewPlan(bucketRef, twoLimits, map[string]int64{"rps": 1})
	now := T + 10_000
	res := p.WithHold(map[string]int64{"rps": 2000}, map[string]int64{"rps": 500}, 4)
	moved := holdItem(p, shape{n: 2, rf: now - 5000}, 5, now-1000, map[string]int64{"rps": 1000})
	ex, err := res.normal(moved, 2, now, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := renderExpr(ex); !strings.Contains(got, "(hg = 4)") {
		t.Errorf("a release of generation 4 on an item in generation 5: %s; want it conditional on hg = 4", got)
	}
	over := holdItem(p, shape{n: 2, rf: now - 5000}, 4, now-GenLifeMs, map[string]int64{"tpm": 300})
	ex, err = p.WithHold(map[string]int64{"rps": 2000}, nil, 0).normal(over, 2, now, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := renderExpr(ex)
	for _, want := range []string{"hs = 1767225610000", "attribute_not_exists(b_rps_hd)"} {
		if !strings.Contains(got, want) {
			t.Errorf("the write that starts generation 5: %s; want %s", got, want)
		}
	}
}

// A reservation that lands a second into its hold generation gives its
// pool PoolLifeMs to live, not the generation's remaining ten minutes: a
// pool holds tokens the bucket cannot refill over, and a pool that lived
// as long as its generation would keep them from everyone else that long.
func TestAPoolLivesPoolLifeMsEarlyInItsGeneration(t *testing.T) {
	m := NewMemory(16)
	knows(t, m, bucketRef, resItem(resNow-5000, -1, resNow-1000, 0, nil), 1, resNow)
	r := NewReserve(m, reservation(), picks(), 0)
	if step := r.Start(resNow); step.Call == nil {
		t.Fatal("no write")
	}
	if step := r.Feed(wrote(resItem(resNow, 7000, resNow-1000, 2000, nil)), resNow); !step.Done || r.Declined {
		t.Fatalf("%q, want done", describe(step))
	}
	if r.Until != resNow+PoolLifeMs {
		t.Fatalf("the pool lives until %d ms from now, want %d", r.Until-resNow, PoolLifeMs)
	}
}

// A reservation lands on a shard no one else writes. The memory counts its
// write as this process's own: it sees no other writer there (counted as
// another's, the next writes would burn headroom and pace themselves for
// a writer that does not exist).
func TestAReservationsOwnWriteIsNotCountedAsAnothers(t *testing.T) {
	m := NewMemory(16)
	it := resItem(resNow-5000, -1, resNow-1000, 0, nil)
	knows(t, m, bucketRef, it, 1, resNow-2000)
	st := sim(t, it)
	r := NewReserve(m, reservation(), picks(), 0)
	if step := r.Feed(exec(t, st, r.Start(resNow)), resNow); !step.Done || r.Declined {
		t.Fatalf("%q, want done", describe(step))
	}
	if v := m.View(bucketRef, 0); v.Others != 0 {
		t.Fatalf("other writers' rate %v after its own write, want 0", v.Others)
	}
}

// Two processes configured with the same limits listed in another order
// agree on the limits hash, which every write is conditional on: else
// each one's writes would fail on the items the other wrote, and the
// normal write of each would rewrite them back and forth.
func TestTheLimitsHashIgnoresTheOrderOfTheLimits(t *testing.T) {
	eurMonth := Limit{Name: "eur", Limit: usdMonth.Limit, Calendar: usdMonth.Calendar}
	jobs := inflight2
	jobs.Name = "jobs"
	a := NewPlan(bucketRef, []Limit{rps10, reqDay, eurMonth, inflight2, jobs}, nil)
	b := NewPlan(bucketRef, []Limit{jobs, inflight2, eurMonth, reqDay, rps10}, nil)
	if a.hash != b.hash {
		t.Fatalf("the same limits in another order: hash %d and %d", a.hash, b.hash)
	}
}

// The limits hash keeps apart configurations whose bytes run into each
// other: each string it mixes ends with a 0 and each cap starts with a
// 'c', so a name that ends with the bytes another configuration puts
// after its own name (validation would refuse these names, the hash must
// not rely on it) is still another configuration. Else a bucket written
// under one would be taken for the other's, its items charged under
// limits they were not made for.
func TestTheLimitsHashTellsApartConfigurationsWhoseBytesRunTogether(t *testing.T) {
	capOf := func(name string, n, ttl int64) Limit {
		return Limit{Name: name, Limit: bucket.Limit{Capacity: n * 1000, Burst: n * 1000}, TTL: ttl}
	}
	le := func(vs ...int64) string {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return string(b)
	}
	quotaOf := func(name string, loc *time.Location) Limit {
		return Limit{Name: name, Limit: reqDay.Limit, Calendar: bucket.Calendar{Window: bucket.Day, Loc: loc}}
	}
	for _, c := range []struct {
		name string
		a, b []Limit
	}{
		{"two caps, and one whose name holds the first's N and TTL and the second's name",
			[]Limit{capOf("a", 2, 60_000), capOf("b", 2, 60_000)},
			[]Limit{capOf("a\x00"+le(2, 60_000)+"b", 2, 60_000)}},
		{"a name one byte longer, its N and TTL one byte later",
			// "ab", N 2 and a TTL whose last byte is a 'c', then "x"; "a",
			// N and TTL the same bytes from the "b" on, then "cx".
			[]Limit{capOf("ab", 2, int64('c')<<56|60_000), capOf("x", 2, 60_000)},
			[]Limit{capOf("a", int64('b')|2<<8, 60_000<<8), capOf("cx", 2, 60_000)}},
		{"a quota's name ending with its zone's first letter",
			[]Limit{rps10, quotaOf("requests", nil)},
			[]Limit{rps10, quotaOf("request", time.FixedZone("sUTC", 0))}},
	} {
		if a, b := NewPlan(bucketRef, c.a, nil), NewPlan(bucketRef, c.b, nil); a.hash == b.hash {
			t.Errorf("%s: the same hash %d", c.name, a.hash)
		}
	}
}

// WithAmounts makes the plan of an adjust or a refund, which is made in
// no hold generation: derived from a plan that carries one (a pool's
// return in generation 4, here with nothing to give back or release), it
// is the same charge as derived from the acquire's plan (see Plan.Same),
// not a charge of generation 4.
func TestAnAdjustsPlanCarriesNoHoldGeneration(t *testing.T) {
	p := resPlan()
	amounts := map[string]int64{"rps": -1000}
	if a, b := p.WithReturn(nil, nil, 4).WithAmounts(amounts), p.WithAmounts(amounts); !a.Same(b) {
		t.Fatalf("the adjust derived from a plan of generation 4 is in generation %d, not the same as the acquire's (%d)", a.gen, b.gen)
	}
}

// A reservation that lost a race goes on from the item its failed write
// returned, also when the memory keeps a newer image (an answer to
// another write of this process, with one write more since the same
// refill, overtook it): the headroom its next write burns is judged on
// that item, the one the write is built from. The item holds 1,000 of the
// limit's 100,000 tokens (100 a ms): the write burns 97 tokens beyond its
// 3, a ms of refill, as a process's first writes to a bucket do. The
// newer image's 3 tokens would leave no room to burn any.
func TestAReservationsRetryBurnsHeadroomOnTheItemItLostTo(t *testing.T) {
	fast := perSecond("rps", 100_000)
	p := NewPlan(bucketRef, []Limit{fast}, map[string]int64{"rps": 1})
	res := p.WithHold(map[string]int64{"rps": 2000}, nil, 0)
	item := func(tk, writes int64) store.Item {
		return holdRaw(p, shape{rf: resNow - 20, tk: map[string]int64{"rps": tk}, tc: map[string]int64{"wcu": writes * unit}}, 4, resNow-1000, nil)
	}
	m := NewMemory(16)
	knows(t, m, bucketRef, item(3_000, 6), 1, resNow-8)
	r := NewReserve(m, res, picks(), 0)
	if step := r.Start(resNow); step.Call == nil || r.Declined {
		t.Fatalf("%q, want a write", describe(step))
	}
	lost := item(1_000_000, 5)
	step := r.Feed(failed(lost), resNow)
	if step.Call == nil {
		t.Fatalf("after the lost race: %q, want a write", describe(step))
	}
	w0, _ := image(t, lost).writes()
	if v := m.View(bucketRef, 0); v.Img == nil {
		t.Fatal("the memory has no image")
	} else if w, _ := v.Img.writes(); w <= w0 {
		t.Fatalf("the memory's image shows %d writes, the item %d: the story needs the newer image kept", w, w0)
	}
	burn := make([]int64, len(res.specs))
	burn[0] = 97_000
	q := res.withBilled(1) // the failed write billed
	want, err := build(func(k *builder) { q.emitReserve(k, 1, resNow, 4, burn) })
	if step.Path != PathSpeculative || err != nil || !want.Equal(step.Call.Update.Expr) {
		t.Fatalf("the write after the lost race: %q (%v), want the consumption-only write burning 97 tokens:\n got %s\nwant %s", describe(step), err, renderExpr(step.Call.Update.Expr), renderExpr(want))
	}
}

// A quota rolled out as a shadow limit is known as one by name: a
// cascade that a shadow quota alone refused is not refused by it (the
// refusal only counts toward what the rollout would refuse).
func TestAShadowQuotaIsKnownAsOne(t *testing.T) {
	day := reqDay
	day.Shadow = true
	p := NewPlan(bucketRef, []Limit{rps10, day}, map[string]int64{"rps": 1, "req": 1})
	if !p.shadow("req") || p.shadow("rps") {
		t.Fatalf("shadow: req %v, rps %v; want true, false", p.shadow("req"), p.shadow("rps"))
	}
}

// A quota's N changed in the configuration changes the limits hash: the
// blind writes then fail on items written under the old N, and the write
// from the returned item records the new one (from the next window).
func TestAChangedQuotaChangesTheLimitsHash(t *testing.T) {
	more := reqDay
	more.Capacity, more.Burst = 900_000, 900_000
	a := NewPlan(bucketRef, []Limit{rps10, reqDay}, nil)
	b := NewPlan(bucketRef, []Limit{rps10, more}, nil)
	if a.hash == b.hash {
		t.Fatal("800 and 900 requests a day have the same limits hash")
	}
}

// Three rate limits listed in reverse name order make the same plan as in
// name order: the limits hash and the order the writes name them in (an
// expression is the same on every process) agree.
func TestRateLimitsInAnyOrderMakeTheSamePlan(t *testing.T) {
	a := NewPlan(bucketRef, []Limit{perSecond("a", 10), perSecond("b", 10), perSecond("c", 10)}, nil)
	b := NewPlan(bucketRef, []Limit{perSecond("c", 10), perSecond("b", 10), perSecond("a", 10)}, nil)
	if a.hash != b.hash || !slices.Equal(a.keysLimits().Names, b.keysLimits().Names) {
		t.Fatalf("hash %d, %v and hash %d, %v; want the same", a.hash, a.keysLimits().Names, b.hash, b.keysLimits().Names)
	}
}

// A doubling made by a plan names the rate limits whose guards it resets
// (an item written for the plan holds exactly these): all of them, and not
// the write-unit gauge, which has no guard any write is conditional on.
func TestADoublingNamesThePlansRateLimits(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{rps10, perMinute("tpm", 60), reqDay}, nil)
	if got := p.keysLimits().Names; !slices.Equal(got, []string{"rps", "tpm"}) {
		t.Fatalf("the doubling names %v; want [rps tpm]", got)
	}
}

// A quota renamed, or moved to another time zone, changes the limits hash.
func TestARenamedOrMovedQuotaChangesTheLimitsHash(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip(err)
	}
	renamed, moved := reqDay, reqDay
	renamed.Name = "rex"
	moved.Calendar.Loc = paris
	base := NewPlan(bucketRef, []Limit{rps10, reqDay}, nil).hash
	for what, l := range map[string]Limit{"name": renamed, "time zone": moved} {
		if NewPlan(bucketRef, []Limit{rps10, l}, nil).hash == base {
			t.Errorf("a quota with another %s has the same limits hash", what)
		}
	}
}

// A refusal promised the request would fit by T+100. At T+100 the image
// refilled holds two tokens, one of them taken by this process's write
// still in flight: the other is the request's. The process asks the store
// rather than count, on top, what the others likely consumed since (their
// drain of 5 tokens a second would leave half a token): their writers
// that met the refusal would all refuse themselves on the same guess.
func TestAKeptPromiseRefusesOnlyForTheProcesssOwnWrites(t *testing.T) {
	p := plan1(bucketRef)
	im := image(t, shape{rf: T, tk: map[string]int64{"rps": 1000}}.item(p))
	v := ShardView{Img: im, At: T, RateAt: T, Drain: map[string]float64{"rps": 5}, Promise: T + 100, Pending: map[string]int64{"rps": 1000}}
	if p.refusesLocally(&v, 1, T+100, Options{}) {
		t.Fatal("refused locally at its kept promise, with a token left beside the write in flight")
	}
	v.Pending = map[string]int64{"rps": 1001}
	if !p.refusesLocally(&v, 1, T+100, Options{}) {
		t.Fatal("not refused with the write in flight taking a millitoken of the request's token")
	}
}

// The others drained a bucket's store: their drain is above the refill,
// and they made 99.4 % of the writes. The process's part of the writes
// (0.6 %) is less than the 1/64 of the refill the drain is taken to leave
// it: it counts on the 1/64 (paced, at the limit), not on less.
func TestAProcessCountsOnAtLeastWhatTheOthersDrainLeaves(t *testing.T) {
	rps := &plan1(bucketRef).specs[0]
	v := ShardView{At: T, RateAt: T, Rate: 1.6, Others: 1.59, Drain: map[string]float64{"rps": 12}}
	if got, want := v.accrual(rps, 1), 10.0/minAccrual*pace; got != want {
		t.Fatalf("accrual %v, want %v (1/64 of the refill, paced)", got, want)
	}
}

// A failed write returned an item whose day of the quota is spent (half a
// request left), or whose cap has both its slots taken: the acquire is
// refused from the item (an application limit short), though its rate
// holds every token.
func TestAnItemWithTheQuotaOrCapSpentIsShortForTheApplication(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1, "req": 1})
	spent := dayItem(p, 0, 1, T, 500, 1)
	spent[attrRefill] = store.Int(T + 1000)
	if k := p.shortfall(image(t, spent), 1, T+1100, false); k != shortApp {
		t.Errorf("a spent day: shortfall %d, want %d (the application's)", k, shortApp)
	}
	c := capPlan(inflight2)
	if k := c.shortfall(capRing(t, c, T+1000, 2, 0), 1, T+1000, false); k != shortApp {
		t.Errorf("a full cap: shortfall %d, want %d (the application's)", k, shortApp)
	}
}

// fast is a limit of 1,000 tokens a second (a token a ms), burst 1,000.
var fast = Limit{Name: "rps", Limit: bucket.Limit{Capacity: 1_000_000, Burst: 1_000_000, RefillAmount: 1_000_000, RefillPeriod: 1000}}

// slow1 is a limit of a token a second, named to come first in a plan.
var slow1 = perSecond("aslow", 1)

// A process that knows another writer writes to the shard 0.2 times a ms
// finds it full by now: the first write rides ahead (the full write would
// fail on the others' writes within a token's 100 ms), and its slack
// covers three of the others' gaps, 15 ms: it burns 0.15 token and lands
// on a bucket full for less than 15 ms. A burn of the largest ride (3 %
// of the burst, 30 ms) would take twice the refill it needs.
func TestARideAheadBurnsForThreeOfTheOthersGaps(t *testing.T) {
	p := plan1(bucketRef)
	im := image(t, shape{rf: T - 2000}.item(p))
	v := ShardView{Img: im, At: T, Rate: 0.3, Others: 0.2, RateAt: T}
	ex, path, err := p.blind(&v, 1, T, 0.5, PathNone, false)
	if err != nil {
		t.Fatal(err)
	}
	got := renderExpr(ex)
	if want := fmt.Sprintf("(b_rps_fl > %d)", T-15); path != PathSpeculative || !strings.Contains(got, want) {
		t.Fatalf("%v: %s\nwant the ride-ahead write guarded by %s", path, got, want)
	}
}

// An item whose pools hold part of the burst is never charged by the
// ride-ahead write (its argument is made at the whole burst): the first
// write on it, full by now, is the full write, whatever the others' rate.
func TestTheFirstWriteOnAFullItemWithHoldsIsTheFullWrite(t *testing.T) {
	p := plan1(bucketRef)
	held := holdItem(p, shape{rf: T - 10_000}, 1, T-100, map[string]int64{"rps": 1000})
	v := ShardView{Img: held, At: T, Rate: 0.3, Others: 0.2, RateAt: T}
	if got := p.first(&v, 1, T); got != PathFull {
		t.Fatalf("first write %v, want %v", got, PathFull)
	}
}

// A plan of a token a second and 10 a second: a token takes a second to
// refill, and that is the charge's refill time (not the 100 ms of the
// faster limit). Burning 10 ms of the slow limit and 30 ms of the fast
// one, the ride-ahead write lands only on a bucket full for less than the
// shorter, 10 ms. A plan that charges nothing rides on no slack.
func TestAPlansChargeTimeIsItsSlowestAndItsSlackItsShortest(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{slow1, rps10}, map[string]int64{"aslow": 1, "rps": 1})
	if p.specs[0].name != "aslow" {
		t.Fatalf("specs in the order %q, ...; the test wants the slow limit first", p.specs[0].name)
	}
	if got := p.chargeTime(1); got != 1000 {
		t.Errorf("charge time %d ms, want 1000", got)
	}
	if got := p.slack(1, []int64{10, 300, 0}); got != 10 {
		t.Errorf("slack %d ms, want 10", got)
	}
	none := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 0})
	if got := none.slack(1, nil); got != 0 {
		t.Errorf("a plan charging nothing: slack %d, want 0", got)
	}
}

// A write lost a race and the item it returned says the bucket has been
// full for 5 ms: with others writing, the write from it rides ahead
// burning its cushion (10 ms of refill), which every racer lands, rather
// than the full write only one of them wins.
func TestAfterALostRaceABucketJustFullIsRiddenAhead(t *testing.T) {
	p := plan1(bucketRef)
	im := image(t, shape{rf: T - 1005, tk: map[string]int64{"rps": 0}}.item(p)) // full at T-5
	v := ShardView{At: T - 500, Rate: 0.3, Others: 0.2, RateAt: T - 500}
	if _, path, err := p.informed(im, v, 1, T, 0, true); err != nil || path != PathRetry {
		t.Fatalf("path %v (%v), want %v", path, err, PathRetry)
	}
}

// A write lost a race on a busy shard, and the process had no image of it
// before: the write from the item returned, a bucket just below its
// burst, burns headroom judged from that item (three tokens beside the
// charge's one), as every write on a shared shard near its ceiling does.
func TestTheWriteFromAReturnedItemBurnsHeadroomJudgedFromIt(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{fast}, map[string]int64{"rps": 1})
	im := image(t, shape{rf: T, tk: map[string]int64{"rps": 999_000}, ahead: map[string]int64{"rps": 100}}.item(p))
	v := ShardView{Rate: 0.5, Others: 0.4, RateAt: T}
	ex, path, err := p.informed(im, v, 1, T, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := renderExpr(ex); path != PathRetry || !strings.Contains(got, "ADD b_rps_tk -4000,") {
		t.Fatalf("%v: %s\nwant the consumption-only write taking 4 tokens", path, got)
	}
}

// A bucket full of two limits since different instants has been full
// since the earlier: a token a second full 950 ms before now, 10 a second
// full 5 ms before.
func TestABucketIsFullSinceItsEarliestLimit(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{slow1, rps10}, map[string]int64{"aslow": 1, "rps": 1})
	im := image(t, shape{rf: T - 1000, tk: map[string]int64{"aslow": 950, "rps": 50}}.item(p))
	if got := p.fullSince(im, T); got != T-950 {
		t.Fatalf("full since %d, want %d", got, T-950)
	}
}

// The bucket was doubled since the item a failed write returned (it says
// one shard, the plan two): the write from it is the normal write, which
// brings the item to two shards, not the consumption-only write, whose
// condition on the shard count the item fails.
func TestAnItemOfAnotherShardCountIsNotChargedByTheConsumptionWrite(t *testing.T) {
	p := planBusy(bucketRef)
	im := image(t, shape{rf: T, tk: map[string]int64{"rps": 5000}}.item(p))
	if _, path, err := p.informed(im, ShardView{}, 2, T+1, 0, false); err != nil || path != PathNormal {
		t.Fatalf("path %v (%v), want %v", path, err, PathNormal)
	}
}

// A charge that also bills a failed write charges the hidden limit two
// write units: that does not make a busy limit's shard one of few writes
// (the hidden limit is the partition's, never the application's), so the
// bucket may still double.
func TestBilledWritesDoNotMakeABusyShardOneOfFewWrites(t *testing.T) {
	if p := planBusy(bucketRef).withBilled(1); p.fewWrites(1) {
		t.Fatal("a busy limit with a failed write billed counts as few writes")
	}
}

// A writer's image is 100 ms old and showed the bucket (a token a ms)
// full 200 ms before now; the others' writes since (0.4 a ms, 2 ms apart)
// kept 80 ms of that: full-at is behind the clock. The distance behind
// counts as none: the writer burns about one interval more than at the
// target for its old news (1.1 intervals, 2 tokens in whole ms), not the
// most a write burns (headroomGain), which would overshoot once the
// others, correcting too, have moved full-at ahead.
func TestAnOldImageOfABucketFullLongAgoBurnsLittleHeadroom(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{fast}, map[string]int64{"rps": 1})
	im := image(t, shape{rf: T - 300, tk: map[string]int64{"rps": 900_000}}.item(p)) // full at T-200
	v := ShardView{Img: im, At: T - 100, Rate: 0.5, Others: 0.4, RateAt: T - 100}
	if b := p.headroom(&v, 1, T); burnOf(b, 0) != 2000 {
		t.Fatalf("burn %v, want 2000 of rps", b)
	}
}

// A throttle on a bucket being drained: the view is taken as saturated,
// the others taking all but what a client ever leaves itself. On a limit
// of a thousand tokens a second a request of one token is a small part of
// the burst: the others are still taken to leave 1/64 of the refill. A
// request of 6 tokens of a burst of 10 cannot wait on a bucket that fills
// meanwhile: the others are taken to leave all of it, drain none (not a
// negative drain).
func TestASaturatedViewLeavesAtLeastASixtyFourthAndDrainsNoLessThanNone(t *testing.T) {
	v := ShardView{At: T}
	p := NewPlan(bucketRef, []Limit{fast}, map[string]int64{"rps": 1})
	if d := v.saturated(p, 1, T).Drain["rps"]; d != 1000*(1-1.0/minAccrual) {
		t.Errorf("one token of 1,000 a second: drain %v, want %v", d, 1000*(1-1.0/minAccrual))
	}
	six := NewPlan(bucketRef, []Limit{rps10}, map[string]int64{"rps": 6})
	if d := v.saturated(six, 1, T).Drain["rps"]; d != 0 {
		t.Errorf("6 tokens of a burst of 10: drain %v, want 0", d)
	}
}

// An acquire charged a request of the day's quota on an item that did not
// have it yet (its settlement carries no window), and an Adjust above the
// estimate since left the day a request and a half in debt. The refund of
// the request lands: a refund is not conditional on the day's floor (with
// the floor, a day in debt deeper than the refund could never be given
// it back), and the day is half a request in debt.
func TestARefundReachesADayInDebtDeeperThanIt(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100), reqDay}, map[string]int64{"rps": 1, "req": 1})
	st := sim(t, dayItem(p, 0, 1, T, -1500, 1))
	ex, err := p.WithAmounts(map[string]int64{"req": -1000}).adjust(1, T+1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
		t.Fatalf("the refund: %v (%s)", err, renderExpr(ex))
	}
	if left := attr(t, st, bucketRef, 0, "q_req_tk"); left != -500 {
		t.Fatalf("the day holds %d, want -500", left)
	}
}

// An adjust charges 500 of rps and refunds 500 of aslow after the shard
// expired. The shard is made again full less the charge: aslow at its
// burst (a bucket cannot be refunded above it, and nothing was counted
// against it), rps at the burst less 500.
func TestAnAdjustMakingAnExpiredShardAgainTakesOnlyItsCharges(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{slow1, rps10}, map[string]int64{"aslow": 1, "rps": 1})
	st := sim(t)
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"aslow": -500, "rps": 500}), 0, 1)
	play(t, st, a.Start(T), a.Feed, T, "update 0 adjust", "put 0 create", "done none")
	if tk, tc := attr(t, st, bucketRef, 0, "b_aslow_tk"), attr(t, st, bucketRef, 0, "b_aslow_tc"); tk != 1000 || tc != 0 {
		t.Errorf("aslow made holding %d, consumed %d; want its burst 1000, 0", tk, tc)
	}
	if tk := attr(t, st, bucketRef, 0, "b_rps_tk"); tk != 9500 {
		t.Errorf("rps made holding %d, want 9500", tk)
	}
}

// An adjust of 15 tokens of rps10 (a burst of 10) after the shard expired
// makes it again 5 tokens in debt: it is full again 1.5 s later, and the
// item lives an hour after twice that (the debt counts whole), not after
// twice the second an empty bucket takes: expiring sooner would forgive
// the debt.
func TestAShardMadeInDebtLivesUntilTheDebtIsPaid(t *testing.T) {
	p := plan1(bucketRef)
	st := sim(t)
	a := NewAdjust(NewMemory(0), p.WithAmounts(map[string]int64{"rps": 15_000}), 0, 1)
	play(t, st, a.Start(T), a.Feed, T, "update 0 adjust", "put 0 create", "done none")
	if ttl := attr(t, st, bucketRef, 0, store.AttrTTL); ttl != (T+3000)/1000+3600 {
		t.Fatalf("expiry %d, want %d", ttl, (T+3000)/1000+3600)
	}
}

// A process's first acquire on a key it has no item of, for a plan of
// two rate limits of which it charges only rps: the blind write that also
// creates the bucket leaves aslow, charged nothing, whole on the new item
// (its total consumed, which an item is decoded with, and its full-at
// instant, now), as the Put would.
func TestABucketMadeByTheFirstWriteHoldsALimitItChargesNothing(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{slow1, rps10}, map[string]int64{"rps": 1})
	ex, _, err := p.blind(&ShardView{}, 1, T, 0.5, PathNone, true)
	if err != nil {
		t.Fatal(err)
	}
	st := sim(t)
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
		t.Fatalf("the first write: %v (%s)", err, renderExpr(ex))
	}
	image(t, st.Peek(bucketRef.Key()))
	if tc, fl, fh := attr(t, st, bucketRef, 0, "b_aslow_tc"), attr(t, st, bucketRef, 0, "b_aslow_fl"), attr(t, st, bucketRef, 0, "b_aslow_fh"); tc != 0 || fl != T || fh != T {
		t.Fatalf("aslow made with tc %d, fl %d, fh %d; want 0, %d, %d", tc, fl, fh, T, T)
	}
}

// A limit of a token a second is added to a bucket that had only rps,
// and rps is raised from 10 to 20 a second. The first acquire under the
// new limits writes both: aslow new (its request counted in its total
// consumed, which usage reads), rps with its new configuration (burst and
// refill, which the next reader decodes the bucket with).
func TestTheFirstAcquireUnderNewLimitsWritesThemIn(t *testing.T) {
	old := image(t, shape{rf: T - 10_000}.item(plan1(bucketRef)))
	p := NewPlan(bucketRef, []Limit{slow1, perSecond("rps", 20)}, map[string]int64{"aslow": 1, "rps": 1})
	ex, err := p.normal(old, 1, T, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := sim(t, shape{rf: T - 10_000}.item(plan1(bucketRef)))
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
		t.Fatalf("the write: %v (%s)", err, renderExpr(ex))
	}
	if tc := attr(t, st, bucketRef, 0, "b_aslow_tc"); tc != 1000 {
		t.Errorf("aslow consumed %d, want the request's 1000", tc)
	}
	if bx, ra := attr(t, st, bucketRef, 0, "b_rps_bx"), attr(t, st, bucketRef, 0, "b_rps_ra"); bx != 20_000 || ra != 20_000 {
		t.Errorf("rps stored with burst %d, refill %d; want 20000, 20000", bx, ra)
	}
	// And the expiry of the new limits: each full again within a second.
	if ttl := attr(t, st, bucketRef, 0, store.AttrTTL); ttl != (T+2000)/1000+3600 {
		t.Errorf("expiry %d, want %d", ttl, (T+2000)/1000+3600)
	}
}

// Pools hold a token of a full bucket (its cap: 9 of its 10 tokens). A
// process makes the normal write from that image, and a refund of half a
// token lands first: the write must fail (the refill was capped, and the
// refunded tokens would sit above the cap with this charge in the
// excess), and the writer learns the item again.
func TestANormalWriteOnAnItemWithHoldsFailsAfterARefund(t *testing.T) {
	p := plan1(bucketRef)
	raw := holdRaw(p, shape{rf: T - 10_000}, 1, T-100, map[string]int64{"rps": 1000})
	st := sim(t, raw)
	ex, err := p.normal(image(t, raw), 1, T, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	refund, err := p.WithAmounts(map[string]int64{"rps": -500}).adjust(1, T)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := st.Update(ctx, store.UpdateInput{Key: bucketRef.Key(), Expr: refund}); err != nil {
		t.Fatalf("the refund: %v", err)
	}
	if _, err := st.Update(ctx, store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err == nil {
		t.Fatalf("the normal write landed after the refund: tk %d (%s)", attr(t, st, bucketRef, 0, "b_rps_tk"), renderExpr(ex))
	}
}

// An item without an expiry (made by hand, or by a tool) is given one by
// the first normal write on it: an hour after twice the time its bucket
// takes to fill. Without it, the item would never expire.
func TestANormalWriteGivesAnItemWithoutAnExpiryOne(t *testing.T) {
	p := plan1(bucketRef)
	it := shape{rf: T - 10_000}.item(p)
	delete(it, store.AttrTTL)
	st := sim(t, it)
	ex, err := p.normal(image(t, it), 1, T, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
		t.Fatalf("the write: %v (%s)", err, renderExpr(ex))
	}
	if ttl := attr(t, st, bucketRef, 0, store.AttrTTL); ttl != (T+2000)/1000+3600 {
		t.Fatalf("expiry %d, want %d", ttl, (T+2000)/1000+3600)
	}
}

// A full bucket of rps10 at one shard is doubled by an acquire's normal
// write: shard 0 keeps at most its new share's burst, 5 tokens, less the
// request. Refilled to the old burst of 10 and not capped at the new one,
// it would hold 9: the doubling would raise what the bucket admits.
func TestADoublingWriteCapsShardZeroAtItsShare(t *testing.T) {
	p := planBusy(bucketRef)
	it := shape{rf: T - 10_000}.item(p)
	st := sim(t, it)
	ex, err := p.normal(image(t, it), 2, T, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
		t.Fatalf("the write: %v (%s)", err, renderExpr(ex))
	}
	if tk := attr(t, st, bucketRef, 0, "b_rps_tk"); tk != 4000 {
		t.Fatalf("shard 0 holds %d, want 4000 (5 tokens less 1)", tk)
	}
}

// A normal write billed for two failed writes besides its own (3 write
// units) on a partition whose wcu gauge holds half a unit: the gauge,
// never a condition, bottoms out at 0 rather than going into debt (a
// shard not judged hot must not be refused for it later), and a gauge
// already in debt (5 units, 4 refilled since) is charged down to no
// lower than it stood after the refill, not back to its old debt nor to 0.
func TestTheWriteUnitGaugeBottomsOutAtZero(t *testing.T) {
	p := plan1(bucketRef).withBilled(2)
	s := &p.specs[len(p.specs)-1]
	if !s.hidden {
		t.Fatal("the last spec is not the hidden limit")
	}
	for _, c := range []struct {
		name          string
		tk, rf1, want int64 // millitokens at rf T; the write's rf; what it leaves
	}{
		{"half a unit left", 500, T + 1, 0},
		{"in debt", -5000, T + 5, -3000},
	} {
		im := image(t, shape{rf: T, tk: map[string]int64{"wcu": c.tk}}.item(p))
		st, _ := p.normalStep(s, im, 1, c.rf1, 0, 0)
		if got := st.old + st.delta; got != c.want {
			t.Errorf("%s: the gauge left at %d, want %d", c.name, got, c.want)
		}
	}
}

// A bucket with a cap whose leases live an hour: every write's expiry is
// past the cap's ring, not only an hour after its rate limits are full.
func TestAWritesExpiryOutlivesItsCapsRing(t *testing.T) {
	hour := Limit{Name: "calls", Limit: bucket.Limit{Capacity: 2000, Burst: 2000}, TTL: 3_600_000}
	p := NewPlan(bucketRef, []Limit{rps10, hour}, map[string]int64{"rps": 1, "calls": 1})
	if got, want := p.ttl(nil, 1, T), p.capExpiry(T); got < want {
		t.Fatalf("expiry %d, before the cap's ring leaves the item (%d)", got, want)
	}
}

// An adjust charging a token of a limit of a token a second (and, as
// every write, a write unit) pushes the item's expiry by twice the
// token's refill, 2 s: the write unit's millisecond is not the longest.
func TestAnAdjustPushesTheExpiryByItsSlowestLimit(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{slow1}, map[string]int64{"aslow": 1})
	if got := p.adjustTTL(1); got != 2 {
		t.Fatalf("the expiry pushed %d s, want 2", got)
	}
}

// An acquire charged rps under limits that also have aslow (charged
// nothing); another process, configured with rps alone, has written the
// item since. The adjust of the acquire's charge lands at once on that
// item: it names only the limits it charges, not aslow, which the item
// does not have.
func TestAnAdjustLandsOnAnItemWithoutALimitItChargesNothing(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{slow1, rps10}, map[string]int64{"rps": 1})
	st := sim(t, shape{rf: T - 100, tk: map[string]int64{"rps": 5000}}.item(plan1(bucketRef)))
	ex, err := p.WithAmounts(map[string]int64{"rps": 500}).adjust(1, T)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err != nil {
		t.Fatalf("the adjust: %v (%s)", err, renderExpr(ex))
	}
}

// The configuration changed since an acquire of rps: the adjust, from the
// item its guarded write found, charges the limits that item still has
// (adjustLoose). If rps is removed from the item before that write lands,
// the write fails: it must not make rps again, half a token in debt.
func TestALooseAdjustDoesNotBringBackARemovedLimit(t *testing.T) {
	p := plan1(bucketRef).WithAmounts(map[string]int64{"rps": 500})
	seen := image(t, shape{rf: T - 1000}.item(plan1(bucketRef)))
	ex, ok, err := p.adjustLoose(seen)
	if err != nil || !ok {
		t.Fatalf("adjustLoose: %v, %v", ok, err)
	}
	st := sim(t, shape{rf: T - 500}.item(NewPlan(bucketRef, []Limit{slow1}, map[string]int64{"aslow": 1})))
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: bucketRef.Key(), Expr: ex}); err == nil {
		t.Fatalf("the adjust landed on an item without rps: %v", st.Peek(bucketRef.Key()))
	}
}

// A process acquired 3 tokens of a limit of a thousand a second in its
// last 50 ms: its next write reserves what it will likely ask for in the
// next PoolHorizonMs, 6 tokens, not the most a pool may hold (an eighth of
// the burst, 125): tokens reserved beyond the demand wait in the pool,
// out of every other process's reach.
func TestAPoolReservesForTheDemandNotTheMost(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{fast}, map[string]int64{"rps": 1})
	ps := NewPools()
	for _, at := range []int64{T, T + 10, T + 20} {
		ps.Granted(p, at)
	}
	if got := ps.Extra(p, 1, T+50); got["rps"] != 6000 {
		t.Fatalf("extra %v, want 6000 of rps", got)
	}
	// The same with a clock that starts at the Unix epoch (a test's fake
	// clock): the demand is measured from the first request, at 100 ms,
	// not from the epoch (which would make it a third of that).
	ps = NewPools()
	for _, at := range []int64{100, 110, 120} {
		ps.Granted(p, at)
	}
	if got := ps.Extra(p, 1, 150); got["rps"] != 6000 {
		t.Fatalf("from the epoch: extra %v, want 6000 of rps", got)
	}
}

// A process measured the others consuming 8 millitokens a ms of shard 1
// of a bucket of 2 shards. It learns the bucket doubled to 4: each shard
// now gets half the refill it had, and the others' consumption of shard 1
// is taken to spread with it, 4 a ms. Kept at 8, the estimate would count
// a shard far below its limit as at it.
func TestADoublingSpreadsTheOthersDrainOfEveryShard(t *testing.T) {
	m := NewMemory(16)
	p := plan1(bucketRef)
	knows(t, m, bucketRef, shape{n: 2, rf: T}.item(p), 2, T)
	knows(t, m, bucketRef, shape{shard: 1, n: 2, rf: T}.item(p), 2, T)
	measured(m, bucketRef, 1, 0.5, 0.4, T, map[string]float64{"rps": 8})
	m.learn(bucketRef, 0, nil, 4, T+100, 0, nil)
	if v, _ := m.viewOf(bucketRef, 1); v.Drain["rps"] != 4 {
		t.Fatalf("shard 1's drain %v, want 4", v.Drain)
	}
}

// A window in which the shard's write units grew by less than this
// process's own writes counted in it (one of them landed in the next
// window's count): the others wrote nothing in it, not a negative rate.
func TestTheOthersRateIsNeverNegative(t *testing.T) {
	si := &shardInfo{ownW: 5000}
	si.writeRates(3000, 10)
	if si.others != 0 || si.rate != 0.3 {
		t.Fatalf("rate %v, others %v; want 0.3, 0", si.rate, si.others)
	}
}

// A shard this process measures at the partition's ceiling: three
// throttles make it hot (its bucket may double), and a write that lands
// after them is no fourth reason to say so: only a throttle is.
func TestOnlyAThrottleSaysAShardIsHot(t *testing.T) {
	m := NewMemory(16)
	for i := int64(0); i < busyThrottles; i++ {
		if hot := m.noteWrite(bucketRef, 0, 1, true, busyCeiling, T+i); hot != (i == busyThrottles-1) {
			t.Fatalf("throttle %d: hot %v", i+1, hot)
		}
	}
	if m.noteWrite(bucketRef, 0, 1, false, busyCeiling, T+10) {
		t.Fatal("a write that landed says the shard is hot")
	}
}

// A shard measured near the ceiling, written once after a quiet while and
// then throttled every other write: the fifth throttle, with as many
// writes that landed between them, makes it hot. The write before the
// first throttle is not counted against them: the window that judges the
// partition starts at its first throttle.
func TestTheHotWindowStartsAtTheFirstThrottle(t *testing.T) {
	m := NewMemory(16)
	knows(t, m, bucketRef, shape{rf: T - 1000}.item(plan1(bucketRef)), 1, T-1000)
	m.noteWrite(bucketRef, 0, 1, false, busyNear, T)
	throttled := []bool{true, false, true, false, true, false, true, false, false, true}
	for i, th := range throttled {
		hot := m.noteWrite(bucketRef, 0, 1, th, busyNear, T+1+int64(i))
		if last := i == len(throttled)-1; hot != last {
			t.Fatalf("write %d (throttled %v): hot %v, want %v", i+1, th, hot, last)
		}
	}
}

// A write of this process landed and returned the item, refilled by it:
// the memory keeps that the item's rf is its own, so that its next first
// write on the bucket, full by now, is the full write (no one else wrote
// since, or its rates would say so), not the write the plan's first
// writes found right.
func TestALandedWriteKnowsItsOwnRefill(t *testing.T) {
	m := NewMemory(16)
	img := image(t, shape{rf: T}.item(plan1(bucketRef)))
	m.mu.Lock()
	m.landedLocked(bucketRef, 0, false, 1, busyNo, img, true, 1, T+5, 5, nil)
	m.mu.Unlock()
	if v, _ := m.viewOf(bucketRef, 0); !v.OwnRefill {
		t.Fatal("the item its own write returned is not of its own refill")
	}
}

// Mutants of internal/engine's later files that no test kills, and why
// (tools/mutate, the engine's own tests; see docs/testing.md):
//   - quota.go, forShard's `if len(p.quotas) == 0` return deleted:
//     equivalent. The clone it returns instead has the same specs and no
//     quota to set.
//   - quota.go, emitQuotas' notExists(q.ws) for a quota new to the item
//     removed: equivalent. The write that adds it is the normal write
//     under the rf lock (it moves rf): a second writer from the same image
//     fails on rf, and no other code writes a quota's window.
//   - quota.go, At's `if len(p.quotas) == 0` return deleted:
//     equivalent. The clone it returns instead has the same specs and no
//     quota to pin (Settling then clones no second time).
//   - quota.go, quotaViews' `max(0, end-now)` dropping the 0:
//     equivalent. quotaLeft's end is that of a window at or after now's:
//     always after now.
//   - quota.go, quotaNeedsShardZero's `if n <= 1 || !p.ChargesQuota()`
//     return deleted: equivalent. Every caller asks with more than one
//     shard (Charge.needsShardZero: c.n > 1, or a shard other than 0), and
//     the loop below skips a quota charged nothing.
//   - concurrency.go, epochLen's `max(1, ...)` dropping the 1: equivalent.
//     A cap's TTL is at least a second (validation): an epoch is at least
//     250 ms.
//   - concurrency.go, emitCaps' notExists(c.lv) for a cap new to the item
//     removed: equivalent. As a quota's: the write that adds it is the
//     normal write under the rf lock, and no other code writes a cap's
//     ring.
//   - concurrency.go, emitCaps' condition on the current slot's epoch
//     (k.cond(condEq, c.tag[s], r.tag[s])) removed: equivalent. A slot not
//     stale on the image can only have moved ahead since (a writer whose
//     clock runs ahead retired it), and the write from the item the
//     failure returns adds to that same slot: the lease is counted in the
//     same slot, with one write fewer.
//   - concurrency.go, capViews' `if c.share(n) < c.slots()` (RetryMs -1)
//     deleted (not covered by the run): equivalent. waits is asked for a
//     live count at most share - slots, below 0 then: it never finds one,
//     and its retry is -1 already.
//   - concurrency.go, waits' `max(0, f*E - now)` dropping the 0:
//     equivalent. f is a later epoch than now's: its start is after now.
//   - concurrency.go, Settling's `if len(q.caps) == 0` return deleted:
//     equivalent. The loop below has no cap to pin, and the clone it may
//     make charges the same.
//   - hold.go, holdActions' condition that an item without holds has no
//     generation (attribute_not_exists(hg)) removed: equivalent. A first
//     generation is started only by the normal write, under the rf lock,
//     and no write adds a hold to an item without one (emitReserve needs
//     an open generation).
//   - hold.go, fullHeld's `max(0, capSeen+capShift(...))` dropping the 0:
//     equivalent. The shift lowers the cap only by the write's own new
//     hold, which its charge includes: a write whose charge the cap cannot
//     pay is refused or declined before it is built (shortfall).
//   - hold.go, settleBilled's and Feed's `r.billed = 0` removed:
//     equivalent. Each is followed by the machine's end (a decline, an
//     error, Done), and a Reserve is not fed after it ends.
//   - plan.go, WithExtra's `q.gen = 0` removed: equivalent. Its one
//     caller, WithHold, sets the generation right after.
//   - plan.go, WithReturn's clones of the quotas and the caps removed:
//     equivalent. The return charges them nothing (their amounts are set
//     to 0 just after), and every write skips a quota or cap charged
//     nothing.
//   - decide.go, shortfall's `if s.hidden { at = max(now, im.rf) }` (the
//     if, its assignment, and max dropping either argument): the code was
//     removed. projected counts no refill before rf: judged at a now
//     behind rf, the wcu gauge is already as at rf.
//   - decide.go, latencyTarget's `if lat <= 0 || 2*lat <= target ||
//     l.RefillAmount <= 0` return deleted: equivalent. A latency of at most
//     half the target gives min(2*lat, most) <= target, which max drops;
//     a limit that does not refill has a rate of 0 and burns nothing,
//     whatever its target.
//   - decide.go, latencyTarget's `max(target, ...)` dropping target:
//     equivalent. Past the return, 2*lat > target, and most (the refill
//     of 1/20 of the burst, at most 100 ms) is at least target (of 1/100,
//     at most 50 ms).
//   - decide.go, headroom's gain `min(..., headroomGain)` dropping
//     headroomGain: equivalent. ahead >= 0: gain <= 1 + target/max(target,
//     age) <= 2, headroomGain.
//   - decide.go, headroom's `if target < 1 || gain <= 0` continue
//     deleted: equivalent. The burn is at most target*rate (or
//     gain*interval*rate, NaN when target and age are 0) less the charge:
//     not positive, and withBurn keeps none.
//   - decide.go, knowsOthers' `if v.RateAt == 0 && v.Rate <= 0` return
//     deleted: equivalent. The memory has no others' rate without an
//     estimate (Others 0), and now - 0 is far beyond estimateAge.
//   - paths.go, cushionTokens' `if h == 0` return, orCreate's
//     `start[s.tc] = 0`, emitNormal's SET of the limits hash and
//     adjustTTL's `if longest == 0` return: the code was removed. A refill
//     period is at least 1 ms (0 ms refill to 0), a name missing from
//     start reads 0, emitNormal's item has the plan's hash (its write is
//     conditional on it), and (2*0+999)/1000 is 0.
//   - paths.go, cushion's `max(h, cushionWithin(..., 20))` dropping h:
//     equivalent. With lat > h, the latency cushion (at most min(lat,
//     100 ms) and the refill of 1/20 of each burst) is at least h (at
//     most 10 ms and the refill of 1/100).
//   - paths.go, cushion's `if s.hidden` continue deleted: equivalent. The
//     wcu gauge's 1,000 write units pay any cushion (at most 100 ms of
//     its refill: 100 units) beside a charge of fewer than 900 units.
//   - paths.go, orCreate's `b.conds = b.condsIn[:0]` removed: equivalent.
//     The conditions are appended to a nil slice instead of the builder's
//     array: an allocation, not another write.
//   - paths.go, orCreate's `max(s.amount, 0)` (twice) and normal's
//     `SetIfNotExistsPlus(s.tc, 0, max(s.amount, 0))` dropping the 0:
//     equivalent. orCreate makes only an acquire's first write, which
//     charges no negative amount; a refund on an item without the limit
//     is an adjust's, made by adjustLoose (the item's hash differs).
//   - paths.go, normal's `tks[i] = l.Burst - s.amount` for a limit new to
//     the item removed: equivalent. The expiry counts only a balance below
//     zero, and an acquire charging more than the burst of a limit new to
//     the item is refused before writing (shortfall: it starts full).
//   - paths.go, normal's condition that the item has an expiry (before
//     the ADD to it) removed, and emitNormal's condition on the shard
//     count: equivalent. Both writes are conditional on the image's rf:
//     the item is the image's (which had the expiry), and every write that
//     changes the shard count (a doubling, under the rf lock) moves rf.
//   - paths.go, normalStep's `max(0, capSeen+shift)` dropping the 0:
//     equivalent, as fullHeld's: the shift lowers the cap only by the
//     write's own new hold, which its charge includes.
//   - paths.go, normalStep's room `max(0, min(old.Burst, capSeen) -
//     refilled)` dropping the 0, old.Burst or capSeen: equivalent. ceil is
//     used only by a write that does not rescale, where old.Burst (the
//     cap at the image's count) and capSeen (at n) are the same, and
//     refilled is at most old.Burst.
//   - pool.go, Used's `max(p.left[name], 0)` dropping the 0: equivalent.
//     A pool's left never goes below 0: Take and Debit take at most what
//     it holds, and Give only adds.
//   - memory.go, vouchedUntil's `max(ttl, 0)` dropping the 0: equivalent.
//     A negative expiry vouches until before 1970 either way: never,
//     for a clock past the epoch.
//   - memory.go, learnIn's `if b.doubling != 0 && b.n > b.doubling`
//     (clearing a landed doubling) deleted: equivalent. pendingDoubling,
//     the only reader of b.doubling, clears it on the same condition.
//   - memory.go, spreadDrain's `if len(drain) == 0 || from <= 0 || n <=
//     from` return deleted: equivalent. It is called only for a count that
//     grew (n > from >= 1), and an empty map reads as nil.
//   - memory.go, pendingDoubling's `if b.doubling == 0` return deleted:
//     equivalent. With no doubling, doublingUntil is 0: the next test
//     clears b.doubling (already 0) and returns 0.
//   - memory.go, noteWriteIn's reset of a window over (`*w =
//     throttleWindow{}` before a landed write's return) removed:
//     equivalent. The window left is over or of another count: the next
//     throttle starts a new one, and mayDouble, its other reader, needs
//     a window of now and of the count.
//   - quota.go, chooseDonor's `if !needs` return deleted: equivalent.
//     With no quota empty, canFund has nothing to check and stops at the
//     first shard, and the loop that sets fund and donor skips each quota
//     that is not empty.
//   - quota.go, funded's `if pinned == nil` return deleted: equivalent.
//     Decode of a nil item is a nil image, and funded then returns img.
//   - quota.go, quotaUnstarted's `if n <= 1 || !p.ChargesQuota()` return
//     deleted: equivalent. At n <= 1 the loop over shards n0 (at least 1)
//     to n is empty, and a plan that charges no quota skips each one by
//     its amount.
