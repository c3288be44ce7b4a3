package limiter

import (
	"testing"
	"time"
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

// A pooled lease's rollback goes back to the pool; Close returns it.
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
	calls := e.st.Totals().Requests
	for _, le := range leases[1000:] {
		if err := le.Rollback(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if e.st.Totals().Requests > calls+5 {
		t.Fatalf("rollbacks of pooled leases went to the store: %d calls", e.st.Totals().Requests-calls)
	}
	if err := l.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.consumed("k", "r", "rps"); got != 1000*1000 {
		t.Fatalf("tc = %d after Close, want %d", got, 1000*1000)
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
