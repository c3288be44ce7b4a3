package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// With reservations on, a process that acquires often takes the next
// 100 ms of its demand with one write and answers the acquires that follow
// from that pool, without a store call. Close gives back what it did not
// use: the bucket's counters then say exactly what was admitted.
func TestReservationsServeFromThePool(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithReservations())
	limits := []Limit{PerSecond("rps", 100_000)}
	r := Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}}
	writes, admitted := 0, 0
	for i := 0; i < 5000; i++ { // 5,000 a second for a second
		e.clock.Add(200 * time.Microsecond)
		e.mustAcquire(l, r)
		admitted++
		if ev := e.last(); ev.Path != PathPool {
			writes += ev.RoundTrips
		}
	}
	if writes*10 > admitted {
		t.Fatalf("%d store calls for %d acquires: want at most a tenth", writes, admitted)
	}
	if err := l.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.consumed("k", "r", "rps"); got != int64(admitted)*1000 {
		t.Fatalf("tc = %d after Close, want %d (exactly what was admitted)", got, admitted*1000)
	}
}

// A pooled lease's rollback goes back to the pool; Close returns it. A
// pooled lease's refund goes back to the pool too, capped at what the
// lease took, and its Limits count it.
func TestReservationsRollbackToThePool(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithReservations("rps"))
	limits := []Limit{PerSecond("rps", 100_000)}
	r := Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}}
	var leases []*Lease
	for i := 0; i < 2000; i++ {
		e.clock.Add(100 * time.Microsecond)
		leases = append(leases, e.mustAcquire(l, r))
	}
	last := leases[len(leases)-1]
	before := last.Limits()[0].Remaining
	calls := e.st.Totals().Requests
	for i, le := range leases[1000:] {
		end := le.Rollback
		if i%2 == 0 { // a refund of more than the lease took, which keeps nothing
			if err := le.Adjust(e.ctx, map[string]int64{"rps": -1_000}); err != nil {
				t.Fatal(err)
			}
			end = func(context.Context) error { return le.Commit() }
		}
		if err := end(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if e.st.Totals().Requests > calls+5 {
		t.Fatalf("rollbacks of pooled leases went to the store: %d calls", e.st.Totals().Requests-calls)
	}
	if got := last.Limits()[0].Remaining; got <= before {
		t.Fatalf("the pooled lease's Limits after its rollback: remaining %d, want above %d", got, before)
	}
	if err := l.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.consumed("k", "r", "rps"); got != 1000*1000 {
		t.Fatalf("tc = %d after Close, want %d (each refund capped at its lease's 1)", got, 1000*1000)
	}
}

// A reservation never turns a refusal into an admission: when the pool is
// empty and the bucket cannot grant, the caller is refused with a true
// retry-after.
func TestReservationsRefuseWhenTheBucketIsEmpty(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithReservations())
	limits := []Limit{PerSecond("rps", 100)}
	r := Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}}
	admitted := 0
	for i := 0; i < 300; i++ {
		e.clock.Add(time.Millisecond)
		if _, err := l.Acquire(e.ctx, r); err == nil {
			admitted++
		}
	}
	// 300 ms at 100 a second, burst 100: at most 130.
	if admitted > 130 {
		t.Fatalf("%d admitted in 300 ms on a 100/s bucket", admitted)
	}
	if err := l.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.consumed("k", "r", "rps"); got != int64(admitted)*1000 {
		t.Fatalf("tc = %d after Close, want %d", got, admitted*1000)
	}
}

// A pool's tokens were taken from the bucket before anyone got them, and
// the bucket does not refill over them while the pool holds them: its cap
// is the burst less the hold. Here a process fills its pool, the bucket
// refills while the pool still lives, and then, at one instant, another
// process takes what the bucket has while the first serves its pool:
// together they admit at most the burst (the strict bound, burst + rate ×
// window, over a window of no time).
func TestReservationsAdmitAtMostTheBurst(t *testing.T) {
	e := newEnv(t)
	pooled := e.limiter(WithReservations())
	plain := e.limiter()
	limits := []Limit{PerSecond("rps", 1000)}
	r := Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}}
	for i := 0; i < 200; i++ { // 200 acquires in 40 ms: a pool of about 100 ms of that demand
		e.clock.Add(200 * time.Microsecond)
		e.mustAcquire(pooled, r)
	}
	e.clock.Add(500 * time.Millisecond) // the bucket is full again; the pool lives for a second
	held := pooled.pools.Held(keys.Bucket{Namespace: "ns", Entity: "k", Resource: "r"}, "rps", e.clock.Now().UnixMilli()) / 1000
	if held == 0 || held > 1000/8 {
		t.Fatalf("the pool holds %d tokens; want some, at most an eighth of the burst", held)
	}
	admitted := 0
	for i := 0; i < 2000; i++ {
		if _, err := plain.Acquire(e.ctx, r); err == nil {
			admitted++
		}
		if _, err := pooled.Acquire(e.ctx, r); err == nil {
			admitted++
		}
	}
	// The price: what the pool took and had not given back (at most an
	// eighth of the burst) is missing from the burst meanwhile.
	if admitted > 1000 || admitted < 1000-1000/8 {
		t.Fatalf("%d admitted at one instant against a burst of 1000 (a pool of %d held before), want at most the burst and at least the burst less the pool's hold",
			admitted, held)
	}
}

// A process that reserved from a bucket and then left it alone for hours
// must not return its pool's rest to a bucket that DynamoDB deleted
// meanwhile and another process made again, full: the rest would be
// tokens the new bucket never gave out. Past ReturnHorizonMs the rest is
// dropped, as a crashed process's is.
func TestReservationsAStalePoolIsNotReturnedToABucketMadeAgain(t *testing.T) {
	e := newEnv(t, memsim.WithPartitionLimits(0, 0)) // thousands of writes at one instant
	pooled := e.limiter(WithReservations())
	plain := e.limiter()
	limits := []Limit{PerSecond("rps", 1000)}
	r := Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}}
	for i := 0; i < 200; i++ { // a pool of about 100 ms of this demand
		e.clock.Add(200 * time.Microsecond)
		e.mustAcquire(pooled, r)
	}
	ref := keys.Bucket{Namespace: "ns", Entity: "k", Resource: "r"}
	if held := pooled.pools.Held(ref, "rps", e.clock.Now().UnixMilli()); held == 0 {
		t.Fatal("the pool holds nothing")
	}
	e.clock.Add(2 * time.Hour)
	if _, err := e.st.Delete(e.ctx, store.DeleteInput{Key: ref.WithShard(0).Key()}); err != nil { // expired
		t.Fatal(err)
	}
	admitted := 0
	for i := 0; i < 2000; i++ { // the bucket made again, full, and drained
		if _, err := plain.Acquire(e.ctx, r); err == nil {
			admitted++
		}
	}
	if admitted > 1000 || admitted < 990 {
		t.Fatalf("the new bucket admitted %d, want about its burst of 1000", admitted)
	}
	e.events = nil
	if _, err := pooled.Acquire(e.ctx, r); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("the stale pool's process acquired from a drained bucket: err = %v", err)
	}
	for _, ev := range e.events {
		if len(ev.Returned) != 0 {
			t.Fatalf("returned %v to the bucket made again", ev.Returned)
		}
	}
}

// A pool that holds two limits, and then requests that charge only one of
// them: the reservation writes those requests make release what the pool
// handed out of both, the limit they charge nothing of included. Were that
// release dropped, its hold would stay on the bucket, its cap lower, until
// the hold's generation was reclaimed (up to 10 minutes), and Close could
// not give it back: after Close, no hold may be left.
func TestReservationsReleaseTheHoldOfALimitTheRequestDoesNotCharge(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithReservations())
	// 5,000 acquires a second against a refill of 4,000 from a burst of
	// 100,000: the bucket stays below its cap, and the reservations take
	// the consumption-only write, which must release each limit's hold
	// itself (the writes at the cap set every hold as they go).
	lim := func(name string) Limit {
		return Limit{Name: name, Capacity: 4000, Burst: 100_000, Refill: 4000, Period: time.Second}
	}
	limits := []Limit{lim("rps"), lim("tpm")}
	both := Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1, "tpm": 1}}
	rpsOnly := Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}}
	admitted := map[string]int64{}
	acquire := func(r Request, n int) (released bool) {
		for i := 0; i < n; i++ {
			e.clock.Add(200 * time.Microsecond) // 5,000 a second
			before := e.bucketItem("k", "r", 0)
			e.mustAcquire(l, r)
			for name, v := range r.Consume {
				admitted[name] += v
			}
			after := e.bucketItem("k", "r", 0)
			h0, _ := before.Int("b_tpm_hd")
			h1, _ := after.Int("b_tpm_hd")
			released = released || (e.last().Path != PathPool && h1 < h0)
		}
		return released
	}
	acquire(both, 1000) // pools of both limits, handed out and taken again
	ref := keys.Bucket{Namespace: "ns", Entity: "k", Resource: "r"}
	if held := l.pools.Held(ref, "tpm", e.clock.Now().UnixMilli()); held == 0 {
		t.Fatal("the pool holds no tpm")
	}
	if !acquire(rpsOnly, 1000) {
		t.Error("no write of the requests that charge only rps released any of tpm's hold")
	}
	if err := l.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	it := e.bucketItem("k", "r", 0)
	for _, name := range []string{"rps", "tpm"} {
		if hd, _ := it.Int("b_" + name + "_hd"); hd != 0 {
			t.Errorf("%s: a hold of %d millitokens is left on the bucket after Close", name, hd)
		}
		if got := e.consumed("k", "r", name); got != admitted[name]*1000 {
			t.Errorf("%s: tc = %d after Close, want %d (exactly what was admitted)", name, got, admitted[name]*1000)
		}
	}
}
