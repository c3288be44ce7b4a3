package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// Stories of the transfers that start a quota's window on a shard made by
// a doubling within it (see quota.go, Transfers). The bucket's day started
// on one shard (sc = 1) with the whole quota, 800 requests; a doubling
// then made shard 1, which holds nothing of the day.

// splitDay returns the plan (1 request of req a day, a fast rate), a store
// with shard 0 in the day from T holding left0 (started at one shard, now
// at 2) and shard 1 made in the day before, and a memory that knows shard
// 0 only, from an image of it received at at.
func splitDay(t *testing.T, left0, at int64) (*Plan, *memsim.Store, *Memory) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000), reqDay}, map[string]int64{"rps": 1, "req": 1})
	shard0 := dayItem(p, 0, 2, T, left0, 1)
	st := sim(t, shard0, dayItem(p, 1, 2, T-day, 0, 0))
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shard0, 2, at)
	return p, st, m
}

// dayTotal is what the shards hold of the day from T and have charged in
// it: a transfer moves tokens, it never makes any, so it stays at most
// the quota.
func dayTotal(t *testing.T, st *memsim.Store, p *Plan, n int) int64 {
	t.Helper()
	sum := int64(0)
	for s := 0; s < n; s++ {
		if left, ok := startedAt(t, st, p, s); ok {
			sum += left
		}
	}
	return sum
}

// An acquire on shard 1 (its image unknown, so a blind write first, which
// fails: shard 1 is still in yesterday) starts the day there in one
// transaction with shard 0: half of what shard 0 shows moves to shard 1,
// which is charged the request in the same write. Without it the acquire
// never tried shard 1 (all the load stayed on shard 0's partition for the
// rest of the day).
func TestStoryANewShardStartsTheDayByATransferFromShardZero(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+100)
	c := NewCharge(m, p, picks(1), Options{})
	s := c.Start(T + 100)
	if got := describe(s); got != "update 1 speculative" {
		t.Fatalf("first step %q, want the write to shard 1", got)
	}
	s = c.Feed(exec(t, st, s), T+105)
	if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
		t.Fatalf("after shard 1's answer: %q, want a transaction on shard 1 and its donor, shard 0", got)
	}
	s = c.Feed(exec(t, st, s), T+110)
	if got := describe(s); got != "get [1 0] discover" {
		t.Fatalf("after the transaction: %q, want the read of shard 1 and its donor (a transaction returns no item)", got)
	}
	if s = run(t, st, c, s, T+115); !s.Done || c.Shard != 1 || c.Img == nil {
		t.Fatalf("the acquire ends %q on shard %d (image %v), want admitted on shard 1 with its item", describe(s), c.Shard, c.Img != nil)
	}
	if left, _ := startedAt(t, st, p, 1); left != 300_000-1000 {
		t.Errorf("shard 1 holds %d of the day, want half of shard 0's 600000 less the request", left)
	}
	if left, _ := startedAt(t, st, p, 0); left != 300_000 {
		t.Errorf("shard 0 holds %d of the day, want 300000 (it gave half)", left)
	}
	if tc := attr(t, st, p.Ref, 1, "q_req_tc"); tc != 1000 {
		t.Errorf("shard 1's req tc = %d, want the request's 1000", tc)
	}
	// The next acquire on shard 1 is a plain write: the day started there.
	c = NewCharge(m, p, picks(1), Options{})
	if s = c.Start(T + 200); s.Call == nil || s.Call.Update == nil {
		t.Fatalf("next acquire on shard 1: %q, want a single write", describe(s))
	}
	if s = run(t, st, c, s, T+200); !s.Done || c.Shard != 1 {
		t.Fatalf("next acquire: %q on shard %d, want admitted on shard 1", describe(s), c.Shard)
	}
	if left, _ := startedAt(t, st, p, 1); left != 300_000-2000 {
		t.Errorf("shard 1 holds %d, want 298000", left)
	}
}

// Two processes start shard 1 at once: the second's transaction fails on
// shard 1 (the day started there), returns its item, and the acquire
// charges it with a plain write. Shard 0 gave once.
func TestStoryATransferSomeoneElseMadeFirstLeavesTheDonorAlone(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+100)
	c := NewCharge(m, p, picks(1), Options{})
	s := c.Feed(exec(t, st, c.Start(T+100)), T+105)
	if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
		t.Fatalf("%q, want the transaction", got)
	}
	// Another process's transfer lands first.
	other := NewCharge(speculating(NewMemory(0)), p, picks(1), Options{})
	knows(t, other.m, bucketRef, dayItem(p, 0, 2, T, 600_000, 1), 2, T+100)
	if s2 := run(t, st, other, other.Start(T+100), T+106); !s2.Done || other.Shard != 1 {
		t.Fatalf("the other process: %q on shard %d, want admitted on shard 1", describe(s2), other.Shard)
	}
	s = c.Feed(exec(t, st, s), T+110)
	if got := describe(s); !strings.HasPrefix(got, "update 1 ") {
		t.Fatalf("after the failed transaction: %q, want a plain write to shard 1", got)
	}
	if s = run(t, st, c, s, T+115); !s.Done || c.Shard != 1 {
		t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 1", describe(s), c.Shard)
	}
	if left, _ := startedAt(t, st, p, 0); left != 300_000 {
		t.Errorf("shard 0 holds %d, want 300000: it gave once", left)
	}
	if left, _ := startedAt(t, st, p, 1); left != 300_000-2000 {
		t.Errorf("shard 1 holds %d, want 298000", left)
	}
}

// Shard 0 was spent since the process last saw it (1.5 requests left, its
// image shows 600): the transaction fails on the donor, the acquire
// learns shard 0's item, half of 1.5 cannot pay a request, so shard 1 is
// left as it is (refused for its quota) and the acquire is charged on
// shard 0.
func TestStoryASpentDonorLeavesTheNewShardEmpty(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+100)
	it := st.Peek(p.Ref.WithShard(0).Key())
	it["q_req_tk"] = store.Int(1_500)
	if _, err := st.Put(context.Background(), store.PutInput{Item: it}); err != nil {
		t.Fatal(err)
	}
	c := NewCharge(m, p, picks(1, 0), Options{})
	s := c.Feed(exec(t, st, c.Start(T+100)), T+105)
	if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
		t.Fatalf("%q, want the transaction", got)
	}
	s = c.Feed(exec(t, st, s), T+110)
	if got := describe(s); !strings.HasPrefix(got, "update 0 ") {
		t.Fatalf("after the donor's refusal: %q, want a write to shard 0", got)
	}
	// Shard 1 was refused for its quota, not for races lost there.
	if c.lastRL == nil || c.lastRL.Outrun {
		t.Fatalf("shard 1's refusal %+v, want one for the quota, not outrun", c.lastRL)
	}
	if s = run(t, st, c, s, T+115); !s.Done || c.Shard != 0 {
		t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 0", describe(s), c.Shard)
	}
	if left, ok := startedAt(t, st, p, 1); ok {
		t.Errorf("shard 1 started the day with %d, want nothing", left)
	}
	if left, _ := startedAt(t, st, p, 0); left != 500 {
		t.Errorf("shard 0 holds %d, want 500", left)
	}
}

// The day ended for shard 0 while the process still saw it (a writer
// whose clock runs ahead started the next day there, at 2 shards): the
// transaction fails on the donor; the process learns the next day from
// shard 0's item, and shard 1, one of those 2, starts it at its half
// without a transfer. Nothing of the day before moved. The write after the
// cancelled transaction charges shard 1's partition for it too, as
// DynamoDB bills it: the blind write that found yesterday, the transaction
// and the write itself, 3 units.
func TestStoryATransferFindsTheDonorInTheNextWindow(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+day-60)
	tomorrow := T + day
	if _, err := st.Put(context.Background(), store.PutInput{Item: dayItem(p, 0, 2, tomorrow, 400_000, 2)}); err != nil {
		t.Fatal(err)
	}
	before := attr(t, st, p.Ref, 1, "b_wcu_tc")
	c := NewCharge(m, p, picks(1), Options{})
	s := c.Feed(exec(t, st, c.Start(tomorrow-50)), tomorrow-45)
	if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
		t.Fatalf("%q, want the transaction", got)
	}
	s = c.Feed(exec(t, st, s), tomorrow-40)
	if got := describe(s); !strings.HasPrefix(got, "update 1 ") {
		t.Fatalf("after the donor's refusal: %q, want a plain write to shard 1", got)
	}
	if s = run(t, st, c, s, tomorrow-35); !s.Done || c.Shard != 1 {
		t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 1", describe(s), c.Shard)
	}
	if ws := attr(t, st, p.Ref, 1, "q_req_ws"); ws != tomorrow {
		t.Fatalf("shard 1 in the day from %d, want %d", ws, tomorrow)
	}
	if left := attr(t, st, p.Ref, 1, "q_req_tk"); left != 400_000-1000 {
		t.Errorf("shard 1 holds %d of the next day, want its half less the request", left)
	}
	if left := attr(t, st, p.Ref, 0, "q_req_tk"); left != 400_000 {
		t.Errorf("shard 0 holds %d, want 400000: no transfer", left)
	}
	if w := attr(t, st, p.Ref, 1, "b_wcu_tc") - before; w != 3*unit {
		t.Errorf("shard 1's write units went up by %d, want %d: the blind write, the transaction and the write", w, 3*unit)
	}
}

// Many acquires over 4 shards whose day started on one: the shards made
// by the doublings start the day by transfers (shard 2 from shard 0,
// shard 3 from shard 1, the shard each split from, once known), and
// what the shards hold of the day plus what they charged stays exactly
// the quota. The acquires go on until the day is spent.
func TestStoryTransfersKeepTheDayWithinItsQuota(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000), reqDay}, map[string]int64{"rps": 1, "req": 1})
	shard0 := dayItem(p, 0, 4, T, 800_000, 1)
	st := sim(t, shard0)
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shard0, 4, T+100)
	rnd := newRand(3)
	admitted := int64(0)
	for i := 0; i < 1000; i++ {
		c := NewCharge(m, p, rnd, Options{NoLocalRefusals: i%2 == 0})
		if s := run(t, st, c, c.Start(T+100+int64(i)), T+100+int64(i)); s.Done {
			admitted++
		}
	}
	charged := int64(0)
	for s := 0; s < 4; s++ {
		if _, ok := startedAt(t, st, p, s); !ok {
			t.Errorf("shard %d never started the day", s)
			continue
		}
		charged += attr(t, st, p.Ref, s, "q_req_tc")
	}
	if held := dayTotal(t, st, p, 4); held+charged != 800_000 {
		t.Errorf("the shards hold %d and charged %d of the day: %d, want the quota 800000", held, charged, held+charged)
	}
	if admitted*1000 != charged || admitted < 790 {
		t.Errorf("%d admitted, %d charged: want nearly the 800 requests of the day", admitted, charged)
	}
}

// A doubling waits while a shard of the current count has not started the
// window (by the process's images): another doubling would add shards
// that hold nothing of it either. Once the transfers started them, the
// bucket may double again within the window.
func TestStoryADoublingWithinTheWindowWaitsForTheTransfers(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+100)
	if !p.quotaUnstarted(m, 2, T+100) {
		t.Fatal("shard 1 unknown: want no doubling")
	}
	c := NewCharge(m, p, picks(1), Options{})
	if s := run(t, st, c, c.Start(T+100), T+100); !s.Done || c.Shard != 1 {
		t.Fatalf("%q on shard %d, want admitted on shard 1", describe(s), c.Shard)
	}
	if p.quotaUnstarted(m, 2, T+100) {
		t.Fatal("shard 1 started the day: want the doubling allowed")
	}
	if !p.quotaUnstarted(m, 4, T+100) {
		t.Fatal("at 4 shards, shards 2 and 3 unknown: want no doubling")
	}
}

// Shard 0's partition, the donor's, throttles the transaction (it is the
// hot one): shard 1 is not hot, but cannot start the day without it, so
// the acquire tries another shard, here shard 0 itself, rather than answer
// unavailable.
func TestStoryATransferThrottledOnTheDonorTriesAnotherShard(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+100)
	c := NewCharge(m, p, picks(1, 0), Options{})
	s := c.Feed(exec(t, st, c.Start(T+100)), T+105)
	if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
		t.Fatalf("%q, want the transaction", got)
	}
	throttled := &store.TransactionCanceledError{Reasons: []store.CancellationReason{
		{Code: store.ReasonNone}, {Code: store.ReasonThrottlingError}}}
	s = c.Feed(Result{Err: throttled}, T+110)
	if got := describe(s); !strings.HasPrefix(got, "update 0 ") {
		t.Fatalf("after the donor's throttle: %q, want a write to shard 0", got)
	}
	if s = run(t, st, c, s, T+115); !s.Done || c.Shard != 0 {
		t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 0", describe(s), c.Shard)
	}
	if _, ok := startedAt(t, st, p, 1); ok {
		t.Error("shard 1 started the day: the transaction was throttled")
	}
}

// A cascade: a key (the child, 1 shard) and its project (the parent),
// whose day started on one shard before it doubled. The parent's acquire
// on shard 1 starts the day there by a transfer; in the same round the
// key's retry finds its tokens gone and is refused. The parent's
// transaction landed but its step still asks for the read of its item:
// the cascade makes that read, then refunds the parent's charge in the
// window the item shows. (Dropped with its read, the parent kept the
// charge of an acquire that was refused: the property test found it, two
// such acquires in a cascade of projects with a daily quota, 4 shards.)
func TestStoryACascadeRefundsAParentChargedByATransfer(t *testing.T) {
	childRef := keys.Bucket{Namespace: "ns", Entity: "key", Resource: "r"}
	child := NewPlan(childRef, []Limit{rps10}, map[string]int64{"rps": 1})
	p := NewPlan(parentRef, []Limit{perSecond("rps", 100_000), reqDay}, map[string]int64{"rps": 1, "req": 1})
	shard0 := dayItem(p, 0, 2, T, 600_000, 1)
	st := sim(t, shard0, dayItem(p, 1, 2, T-day, 0, 0))
	m := speculating(NewMemory(0))
	knows(t, m, parentRef, shard0, 2, T+100)
	knows(t, m, childRef, shape{rf: T}.item(child), 1, T+100)
	c := NewCascade(m, picks(0, 1), Options{}, child, p) // the key on its one shard, the project on shard 1
	s := c.Start(T + 100)
	if got := describeCascade(s); !strings.HasPrefix(got, "child update 0 ") || !strings.Contains(got, "parent update 1 ") {
		t.Fatalf("first round %q, want both writes", got)
	}
	raced := shape{rf: T + 50}.item(child) // another writer refilled it: a lost race, tokens left
	s = c.Feed([]Result{failed(raced), exec(t, st, Step{Call: s.Calls[1]})}, T+105)
	if got := describeCascade(s); !strings.HasPrefix(got, "child update 0 ") || !strings.Contains(got, "parent transact [1 0] ") {
		t.Fatalf("second round %q, want the key's retry and the parent's transaction", got)
	}
	gone := shape{rf: T + 104, tk: map[string]int64{"rps": 0}, ahead: drifted}.item(child)
	s = c.Feed([]Result{failed(gone), exec(t, st, Step{Call: s.Calls[1]})}, T+110)
	if got := describeCascade(s); got != "parent get [1 0] discover" {
		t.Fatalf("after the key's refusal: %q, want the parent's read of its item first", got)
	}
	s = c.Feed([]Result{exec(t, st, Step{Call: s.Calls[0]})}, T+115)
	if got := describeCascade(s); !strings.HasPrefix(got, "parent update 1 undo") {
		t.Fatalf("then %q, want the parent's refund on shard 1", got)
	}
	s = c.Feed([]Result{exec(t, st, Step{Call: s.Calls[0]})}, T+120)
	if got := describeCascade(s); got != "refused child" || s.UndoErr != nil {
		t.Fatalf("answer %q (undo error %v), want the key's refusal, the project's charge returned", got, s.UndoErr)
	}
	if tc := attr(t, st, parentRef, 1, "b_rps_tc"); tc != 0 {
		t.Errorf("the project's shard 1 rps tc = %d, want 0: the charge was refunded", tc)
	}
	if left, _ := startedAt(t, st, p, 1); left != 300_000 {
		t.Errorf("the project's shard 1 holds %d of the day, want the 300000 moved to it, the request refunded", left)
	}
}

// The day ends between the transaction and the read that follows it, and
// another writer starts the next day on shard 1: the item read says the
// next day, but the acquire charged the day the transfer started. Its
// lease keeps an image of that day, so that an Adjust or a Rollback
// settles there (see Plan.At), not in the next day, which would give the
// next day tokens this one took.
func TestStoryATransferReadAfterTheDayEndedKeepsTheDayItCharged(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+100)
	c := NewCharge(m, p, picks(1), Options{})
	s := c.Feed(exec(t, st, c.Start(T+100)), T+105)
	if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
		t.Fatalf("%q, want the transaction", got)
	}
	s = c.Feed(exec(t, st, s), T+110)
	if got := describe(s); got != "get [1 0] discover" {
		t.Fatalf("after the transaction: %q, want the read", got)
	}
	// Another writer starts the next day on shard 1.
	it := st.Peek(p.Ref.WithShard(1).Key())
	it["q_req_ws"] = store.Int(T + day)
	it["q_req_tk"] = store.Int(400_000)
	if _, err := st.Put(context.Background(), store.PutInput{Item: it}); err != nil {
		t.Fatal(err)
	}
	if s = run(t, st, c, s, T+day+5); !s.Done || c.Shard != 1 || c.Img == nil {
		t.Fatalf("the acquire ends %q on shard %d (image %v), want admitted on shard 1 with an image", describe(s), c.Shard, c.Img != nil)
	}
	if ws, _ := c.Img.raw.Int("q_req_ws"); ws != T {
		t.Errorf("the lease's image says the day from %d, want %d: the day the transfer started and the acquire charged", ws, T)
	}
	if at := p.At(c.Img).quotas[0].at; at != T {
		t.Errorf("a settlement of the lease goes to the day from %d, want %d", at, T)
	}
}

// The transaction of TestStoryATransferSomeoneElseMadeFirstLeavesTheDonorAlone,
// lost to another process's transfer, leaves the memory as it found it
// plus what it learnt: nothing of the acquire pending once it is done
// (the cancelled transaction's write landed, so the memory stopped
// counting it), and shard 0's item as the failed transaction returned it,
// 300000 left after the other process's transfer, not the 600000 seen
// before. The write it makes next is a retry, as after any race lost.
func TestStoryALostTransferLeavesNothingPendingAndLearnsTheDonor(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+100)
	c := NewCharge(m, p, picks(1), Options{})
	s := c.Feed(exec(t, st, c.Start(T+100)), T+105)
	if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
		t.Fatalf("%q, want the transaction", got)
	}
	other := NewCharge(speculating(NewMemory(0)), p, picks(1), Options{})
	knows(t, other.m, bucketRef, dayItem(p, 0, 2, T, 600_000, 1), 2, T+100)
	if s2 := run(t, st, other, other.Start(T+100), T+106); !s2.Done || other.Shard != 1 {
		t.Fatalf("the other process: %q on shard %d, want admitted on shard 1", describe(s2), other.Shard)
	}
	// A race lost to another writer: the write after it is a retry.
	if s = c.Feed(exec(t, st, s), T+110); describe(s) != "update 1 retry" {
		t.Fatalf("after the failed transaction: %q, want a retry on shard 1", describe(s))
	}
	if s = run(t, st, c, s, T+115); !s.Done || c.Shard != 1 {
		t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 1", describe(s), c.Shard)
	}
	if pending := m.View(p.Ref, 1).Pending; len(pending) != 0 {
		t.Errorf("shard 1 has %v pending after the acquire, want nothing", pending)
	}
	im0 := m.View(p.Ref, 0).Img
	if im0 == nil {
		t.Fatal("the memory forgot shard 0")
	}
	if left, _ := im0.raw.Int("q_req_tk"); left != 300_000 {
		t.Errorf("the memory's image of shard 0 holds %d of the day, want the 300000 its failed condition returned", left)
	}
}

// donorFailed is a transaction cancelled on the donor's condition, the
// donor's item returned.
func donorFailed(donor store.Item) Result {
	return Result{Err: &store.TransactionCanceledError{Reasons: []store.CancellationReason{
		{Code: store.ReasonNone}, {Code: store.ReasonConditionalCheckFailed, Item: donor}}}}
}

// Shard 0, the donor, doubled to 4 shards since the process saw it at 2:
// its condition fails, and the item it returns, shard 0's, the authority
// on the count, teaches the memory the 4 shards.
func TestStoryADonorsRefusalTeachesTheShardCount(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+100)
	c := NewCharge(m, p, picks(1, 1, 1), Options{})
	s := c.Feed(exec(t, st, c.Start(T+100)), T+105)
	if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
		t.Fatalf("%q, want the transaction", got)
	}
	c.Feed(donorFailed(dayItem(p, 0, 4, T, 400_000, 1)), T+110)
	if n := m.Count(p.Ref); n != 4 {
		t.Errorf("the memory counts %d shards after shard 0's item said 4, want 4", n)
	}
}

// A donor whose condition fails again and again, each time with an item
// that could still fund the transfer (another process keeps moving its
// tokens just before): the acquire gives up on the shard after its
// attempts, rather than try the transaction forever.
func TestStoryADonorFailingForeverEndsTheTries(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+100)
	c := NewCharge(m, p, picks(1, 0), Options{})
	s := c.Feed(exec(t, st, c.Start(T+100)), T+105)
	for i := 0; i <= maxSlowAttempts && strings.HasPrefix(describe(s), "transact [1 0] "); i++ {
		s = c.Feed(donorFailed(dayItem(p, 0, 2, T, 600_000, 1)), T+110)
	}
	if got := describe(s); strings.HasPrefix(got, "transact ") {
		t.Fatalf("after %d refusals of the donor: %q, want the shard given up", maxSlowAttempts+1, got)
	}
}

// At 4 shards, shard 3 split from shard 1, but shard 1 is nearly spent
// (1.5 requests, half of which cannot pay one): shard 3's transfer comes
// from shard 0, half of what shard 0's image shows, not half of shard 1's.
func TestStoryASpentParentLeavesTheTransferToShardZero(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rps", 100_000), reqDay}, map[string]int64{"rps": 1, "req": 1})
	shard0 := dayItem(p, 0, 4, T, 600_000, 1)
	shard1 := dayItem(p, 1, 4, T, 1_500, 0)
	st := sim(t, shard0, shard1, dayItem(p, 3, 4, T-day, 0, 0))
	m := speculating(NewMemory(0))
	knows(t, m, bucketRef, shard0, 4, T+100)
	knows(t, m, bucketRef, shard1, 4, T+100)
	c := NewCharge(m, p, picks(3), Options{})
	s := c.Feed(exec(t, st, c.Start(T+100)), T+105)
	if got := describe(s); !strings.HasPrefix(got, "transact [3 0] ") {
		t.Fatalf("after shard 3's answer: %q, want a transaction on shard 3 and shard 0", got)
	}
	if s = run(t, st, c, s, T+110); !s.Done || c.Shard != 3 {
		t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 3", describe(s), c.Shard)
	}
	if left := attr(t, st, p.Ref, 0, "q_req_tk"); left != 300_000 {
		t.Errorf("shard 0 holds %d, want 300000 (it gave half)", left)
	}
}

// Shard 0 started the next day (a writer whose clock runs ahead), with
// more than the transfer's condition asks of its tokens: the transfer,
// which starts the day before on shard 1, takes nothing of the next day
// from it.
func TestStoryATransferTakesNothingOfTheDonorsNextDay(t *testing.T) {
	p, st, m := splitDay(t, 600_000, T+day-60)
	tomorrow := T + day
	if _, err := st.Put(context.Background(), store.PutInput{Item: dayItem(p, 0, 2, tomorrow, 800_000, 2)}); err != nil {
		t.Fatal(err)
	}
	c := NewCharge(m, p, picks(1), Options{})
	s := c.Feed(exec(t, st, c.Start(tomorrow-50)), tomorrow-45)
	if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
		t.Fatalf("%q, want the transaction", got)
	}
	if s = run(t, st, c, s, tomorrow-40); !s.Done || c.Shard != 1 {
		t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 1", describe(s), c.Shard)
	}
	if left := attr(t, st, p.Ref, 0, "q_req_tk"); left != 800_000 {
		t.Errorf("shard 0 holds %d of the next day, want its 800000: nothing moved", left)
	}
}

// A transaction cancelled on a condition is a write the partition of
// shard 1 took, not refused: it counts among the writes that judge the
// partition's heat, as a failed plain write does. Shard 1 saw 4 throttles
// and 3 writes that landed between them; the acquire's three writes there
// (the blind write, the transaction, the write after it) land or fail on
// a condition. The next throttle, the fifth of 11 writes, leaves the
// partition not hot: fewer than half its writes were throttled (had the
// cancelled transaction not been counted, 5 of 10 would make it hot, and
// the bucket would double).
func TestStoryACancelledTransferCountsAmongTheShardsWrites(t *testing.T) {
	tomorrow := T + day
	for _, c := range []struct {
		name string
		now  int64
		// acquire makes the acquire on shard 1 at now, its transaction
		// cancelled on one of its two conditions.
		acquire func(t *testing.T, p *Plan, st *memsim.Store, m *Memory, now int64)
	}{
		{"cancelled on shard 1's condition (another process started the day there)", T + 100, func(t *testing.T, p *Plan, st *memsim.Store, m *Memory, now int64) {
			c := NewCharge(m, p, picks(1), Options{})
			s := c.Feed(exec(t, st, c.Start(now)), now+5)
			if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
				t.Fatalf("%q, want the transaction", got)
			}
			other := NewCharge(speculating(NewMemory(0)), p, picks(1), Options{})
			knows(t, other.m, bucketRef, dayItem(p, 0, 2, T, 600_000, 1), 2, now)
			if s2 := run(t, st, other, other.Start(now), now+6); !s2.Done || other.Shard != 1 {
				t.Fatalf("the other process: %q on shard %d, want admitted on shard 1", describe(s2), other.Shard)
			}
			s = c.Feed(exec(t, st, s), now+10)
			if got := describe(s); got != "update 1 retry" {
				t.Fatalf("after the cancelled transaction: %q, want a retry on shard 1", got)
			}
			if s = run(t, st, c, s, now+15); !s.Done || c.Shard != 1 {
				t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 1", describe(s), c.Shard)
			}
		}},
		{"cancelled on the donor's (shard 0 is in the next day)", tomorrow - 50, func(t *testing.T, p *Plan, st *memsim.Store, m *Memory, now int64) {
			if _, err := st.Put(context.Background(), store.PutInput{Item: dayItem(p, 0, 2, tomorrow, 400_000, 2)}); err != nil {
				t.Fatal(err)
			}
			c := NewCharge(m, p, picks(1), Options{})
			s := c.Feed(exec(t, st, c.Start(now)), now+5)
			if got := describe(s); !strings.HasPrefix(got, "transact [1 0] ") {
				t.Fatalf("%q, want the transaction", got)
			}
			s = c.Feed(exec(t, st, s), now+10)
			if got := describe(s); !strings.HasPrefix(got, "update 1 ") {
				t.Fatalf("after the donor's refusal: %q, want a plain write to shard 1", got)
			}
			if s = run(t, st, c, s, now+15); !s.Done || c.Shard != 1 {
				t.Fatalf("the acquire ends %q on shard %d, want admitted on shard 1", describe(s), c.Shard)
			}
		}},
	} {
		now := c.now
		p, st, m := splitDay(t, 600_000, now-10)
		for i, throttled := range []bool{true, false, true, false, true, false, true} {
			m.noteWrite(p.Ref, 1, 2, throttled, busyNear, now-60+int64(i))
		}
		c.acquire(t, p, st, m, now)
		if hot := m.noteWrite(p.Ref, 1, 2, true, busyNear, now+20); hot {
			t.Errorf("%s: the fifth throttle makes shard 1 hot, want not: the cancelled transaction is one of its writes", c.name)
		}
	}
}
