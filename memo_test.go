package limiter

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

func memoRequest(entity string, rpm int64) Request {
	return Request{Entity: entity, Resource: "gpt-4", Consume: map[string]int64{"rpm": rpm},
		Limits: []Limit{PerMinute("rpm", 100), PerMinute("tpm", 1000)}}
}

// remembered returns a limiter whose memo is of the request it returns
// (acquired twice).
func remembered(t *testing.T) (*env, *Limiter, Request, *repeatMemo) {
	t.Helper()
	e := newEnv(t)
	l := e.limiter()
	req := memoRequest("a", 1)
	e.mustAcquire(l, req)
	e.mustAcquire(l, req)
	m := l.memo.last.Load()
	if m == nil {
		t.Fatal("no memo")
	}
	return e, l, req, m
}

// The repeat memo is made by the second acquire in a row of the same
// charge, not by one of another bucket or other amounts in between; the
// acquires it serves share its plan.
func TestRepeatMemoMadeOnTheSecondSameCharge(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	memo := func() *repeatMemo { return l.memo.last.Load() }
	e.mustAcquire(l, memoRequest("a", 1))
	if memo() != nil {
		t.Fatal("a memo after one acquire")
	}
	e.mustAcquire(l, memoRequest("b", 1))
	e.mustAcquire(l, memoRequest("a", 1))
	e.mustAcquire(l, memoRequest("a", 2))
	e.mustAcquire(l, memoRequest("a", 1))
	if memo() != nil {
		t.Fatal("a memo after acquires of other buckets or amounts in between")
	}
	e.mustAcquire(l, memoRequest("a", 1))
	m := memo()
	if m == nil || m.entity.ID != "a" || m.resource != "gpt-4" || m.count != 1 {
		t.Fatalf("memo %+v after the second acquire in a row, want one of a on gpt-4", m)
	}
	lease := e.mustAcquire(l, memoRequest("a", 1))
	if lease.parts[0].p.Plan != m.plan.Plan || memo() != m {
		t.Fatal("an acquire of the memo's request did not take its plan")
	}
	if got := lease.Limits(); len(got) != 2 || got[0].Limit != PerMinute("rpm", 100) || got[0].Remaining != 93 {
		t.Fatalf("the lease of a remembered charge reports %+v", got)
	}
	// Another request leaves the memo as it is until its own second time.
	e.mustAcquire(l, memoRequest("b", 1))
	if memo() != m {
		t.Fatal("one acquire of another bucket replaced the memo")
	}
}

// The memo keeps nothing of the caller's: a request whose limits slice was
// changed in place after the memo was made gets a plan of its new limits;
// checks that the memo skips still run for any request that is not
// exactly its own.
func TestRepeatMemoChecksWhatChanged(t *testing.T) {
	e, l, req, _ := remembered(t)
	bad := []struct {
		name   string
		change func(r *Request)
	}{
		{"an unknown policy", func(r *Request) { r.Policy = 9 }},
		{"an amount of 0", func(r *Request) { r.Consume = map[string]int64{"rpm": 0} }},
		{"an amount too large", func(r *Request) { r.Consume = map[string]int64{"rpm": MaxTokens + 1} }},
		{"an amount of no limit", func(r *Request) { r.Consume = map[string]int64{"rpm": 1, "rps": 1} }},
		{"no amount", func(r *Request) { r.Consume = map[string]int64{} }},
		{"a bad entity", func(r *Request) { r.Entity = "a b" }},
		{"a bad resource", func(r *Request) { r.Resource = "/gpt" }},
		{"a bad limit", func(r *Request) { r.Limits[1].Refill = 0 }},
		{"a limit twice", func(r *Request) { r.Limits[1] = r.Limits[0] }},
	}
	for _, c := range bad {
		r := memoRequest("a", 1)
		r.Limits = req.Limits // the caller's slice, changed in place
		saved := slices.Clone(req.Limits)
		c.change(&r)
		if _, err := l.Acquire(e.ctx, r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v, want a validation error", c.name, err)
		}
		copy(req.Limits, saved)
	}
	req.Limits[0] = PerMinute("rpm", 50)
	lease := e.mustAcquire(l, req)
	if got := lease.Limits()[0]; got.Limit != PerMinute("rpm", 50) {
		t.Fatalf("after the caller changed its limits in place, the lease reports %+v", got.Limit)
	}
	if lease.parts[0].p.Plan == l.memo.last.Load().plan.Plan {
		t.Fatal("the memo's plan served other limits")
	}
}

// The memo's plan serves only the limits it was built from: when the
// limits that apply change (stored limits read again), planFor refuses.
func TestRepeatMemoPlanForOtherLimits(t *testing.T) {
	e, _, req, m := remembered(t)
	s := settings{resource: "gpt-4", limits: req.Limits}
	if _, ok := m.planFor(req, s, true); !ok {
		t.Fatal("planFor refused the memo's own request")
	}
	if _, ok := m.planFor(req, s, false); !ok {
		t.Fatal("planFor refused the memo's own request, compared in full")
	}
	s.limits = []Limit{PerMinute("rpm", 100), PerMinute("tpm", 999)}
	if _, ok := m.planFor(req, s, true); ok {
		t.Fatal("planFor served other limits")
	}
	s.limits = req.Limits
	for _, r := range []Request{memoRequest("b", 1), memoRequest("a", 2)} {
		if _, ok := m.planFor(r, s, false); ok {
			t.Fatalf("planFor served %+v", r)
		}
	}
	other := s
	other.resource = "gpt-5"
	if _, ok := m.planFor(req, other, false); ok {
		t.Fatal("planFor served another resource")
	}
	var none *repeatMemo
	if none.asks(req, "gpt-4") {
		t.Fatal("a nil memo asks")
	}
	if _, ok := none.planFor(req, s, true); ok {
		t.Fatal("a nil memo has a plan")
	}
	long := memoRequest("z", 1)
	long.Limits = append(long.Limits, PerSecond("a", 1), PerSecond("b", 1), PerSecond("c", 1))
	l := e.limiter()
	e.mustAcquire(l, long)
	e.mustAcquire(l, long)
	if l.memo.last.Load() != nil {
		t.Fatalf("a memo of %d limits, at most %d", len(long.Limits), maxMemoLimits)
	}
}

// An admitted acquire on the hot path allocates one object of its own
// (its lease, with room for the item the write returns): its allocations
// are those of the store's update, and one. (Counts, not timings: the
// store's own count cancels out.)
func TestAcquireAllocatesOneLease(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts under -race are meaningless")
	}
	clock := memsim.NewManualClock(t0)
	newStore := func() *memsim.Store {
		return memsim.New(memsim.WithClock(clock), memsim.WithStream(false), memsim.WithPartitionLimits(0, 0))
	}
	rec := &tap{recorder: recorder{Store: newStore()}, on: true}
	l, err := New(rec, WithClock(clock), WithNamespace("bench"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := benchRequest()
	acquire := func() {
		clock.Add(2 * time.Millisecond)
		if _, err := l.Acquire(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		acquire()
	}
	in := rec.last
	rec.on = false // the copy of what it records would count
	bare := newStore()
	var before store.Item
	if out, err := rec.Store.Get(ctx, store.GetInput{Key: in.Key, ConsistentRead: true}); err != nil {
		t.Fatal(err)
	} else {
		before = out.Item
	}
	if _, err := bare.Put(ctx, store.PutInput{Item: before}); err != nil {
		t.Fatal(err)
	}
	update := func() {
		if _, err := bare.Update(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	const runs = 50
	got, floor := testing.AllocsPerRun(runs, acquire), testing.AllocsPerRun(runs, update)
	if got != floor+1 {
		t.Fatalf("an acquire allocates %.0f times, its update %.0f: want one more", got, floor)
	}
}

// tap is a recorder that can be turned off.
type tap struct {
	recorder
	on bool
}

func (t *tap) Update(ctx context.Context, in store.UpdateInput) (store.WriteOutput, error) {
	if t.on {
		return t.recorder.Update(ctx, in)
	}
	return t.Store.Update(ctx, in)
}

// A memo serves the configuration its limits came from while the cache
// holds it: limits stored through the same limiter (which invalidates the
// cache) apply to the very next acquire, limits stored by another process
// once the cache's TTL has passed, and the memo then serves the new
// reading.
func TestRepeatMemoServesTheConfigurationWhileCached(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithCacheTTL(time.Minute))
	other := e.limiter()
	req := Request{Entity: "a", Resource: "gpt-4", Consume: map[string]int64{"rpm": 1}, Limits: []Limit{PerMinute("rpm", 100)}}
	e.mustAcquire(l, req)
	e.mustAcquire(l, req)
	m := l.memo.last.Load()
	if m == nil || !m.cached.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("memo %+v, want one cached until the TTL", m)
	}
	if s, ok := m.settings(l.meta.gen.Load(), e.clock.Now()); !ok || !sameLimits(s.limits, m.limits) {
		t.Fatalf("the memo serves %+v, %v", s, ok)
	}
	capacity := func(when string) int64 {
		t.Helper()
		ls := e.mustAcquire(l, req).Limits()
		if len(ls) != 1 {
			t.Fatalf("%s: lease limits %+v", when, ls)
		}
		return ls[0].Limit.Capacity
	}

	// Stored through l: its cache is invalidated, the memo no longer serves.
	if err := l.putLimits(e.ctx, scope{Entity: "a"}, []Limit{PerMinute("rpm", 50)}); err != nil {
		t.Fatal(err)
	}
	if c := capacity("after l stored rpm 50"); c != 50 {
		t.Fatalf("after l stored rpm 50 the acquire ran with capacity %d", c)
	}
	capacity("again")
	m = l.memo.last.Load()
	if m == nil || m.limits[0].Capacity != 50 {
		t.Fatalf("memo %+v, want one of rpm 50", m)
	}

	// Stored by another process: served from the memo until the TTL ends.
	if err := other.putLimits(e.ctx, scope{Entity: "a"}, []Limit{PerMinute("rpm", 40)}); err != nil {
		t.Fatal(err)
	}
	if c := capacity("just after another process stored rpm 40"); c != 50 || l.memo.last.Load() != m {
		t.Fatalf("capacity %d, memo changed %v: want the memo's 50", c, l.memo.last.Load() != m)
	}
	e.clock.Add(time.Minute)
	if c := capacity("a TTL later"); c != 40 {
		t.Fatalf("a TTL after another process stored rpm 40 the acquire ran with capacity %d", c)
	}
	capacity("again")
	if n := l.memo.last.Load(); n == nil || !n.cached.After(m.cached) || n.limits[0].Capacity != 40 {
		t.Fatalf("memo %+v after the cache was read again, want one of rpm 40 cached longer than %v", n, m.cached)
	}
	if _, ok := l.memo.last.Load().settings(l.meta.gen.Load(), e.clock.Now()); !ok {
		t.Fatal("the memo made after the new reading does not serve")
	}

	// Read again unchanged: the memo is renewed, its plan kept.
	n := l.memo.last.Load()
	e.clock.Add(time.Minute)
	capacity("a TTL later, nothing changed")
	if r := l.memo.last.Load(); r == n || r.plan.Plan != n.plan.Plan || !r.cached.After(n.cached) {
		t.Fatalf("memo %+v after an unchanged reading, want a renewal of %+v", r, n)
	}
}

// With the cache off (a TTL of 0) a memo never serves the configuration:
// every acquire reads it.
func TestRepeatMemoWithoutACacheReadsEveryTime(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithCacheTTL(0))
	req := memoRequest("a", 1)
	for range 3 {
		e.mustAcquire(l, req)
	}
	m := l.memo.last.Load()
	if m == nil {
		t.Fatal("no memo")
	}
	if _, ok := m.settings(l.meta.gen.Load(), e.clock.Now()); ok {
		t.Fatal("a memo serves settings with the cache off")
	}
	before := e.st.Totals().Requests
	e.mustAcquire(l, req)
	if reads := e.st.Totals().Requests - before; reads != 2 {
		t.Fatalf("%d store requests for an acquire with the cache off, want 2 (the read, the write)", reads)
	}
}

// A memo made without a cache never serves, whatever the clock says (a
// clock before 1970 included); one the cache was invalidated under is
// renewed by the next reading, also within the same millisecond, and
// serves again.
func TestRepeatMemoEdgesOfItsCache(t *testing.T) {
	t.Run("no cache, a clock before 1970", func(t *testing.T) {
		e := newEnv(t)
		e.clock.Set(time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC))
		l, other := e.limiter(WithCacheTTL(0)), e.limiter()
		req := Request{Entity: "a", Resource: "gpt-4", Consume: map[string]int64{"rpm": 1}, Limits: []Limit{PerMinute("rpm", 100)}}
		for range 3 {
			e.mustAcquire(l, req)
		}
		if err := other.putLimits(e.ctx, scope{Entity: "a"}, []Limit{PerMinute("rpm", 40)}); err != nil {
			t.Fatal(err)
		}
		if c := e.mustAcquire(l, req).Limits()[0].Limit.Capacity; c != 40 {
			t.Fatalf("capacity %d after another process stored 40, with the cache off", c)
		}
	})
	t.Run("invalidated, read again at once", func(t *testing.T) {
		e, l, req, m := remembered(t)
		l.Invalidate()
		if _, ok := m.settings(l.meta.gen.Load(), e.clock.Now()); ok {
			t.Fatal("an invalidated memo serves")
		}
		e.mustAcquire(l, req)
		n := l.memo.last.Load()
		if n == m || n.plan.Plan != m.plan.Plan || n.gen != l.meta.gen.Load() {
			t.Fatalf("memo %+v after the reading, want a renewal of %+v in generation %d", n, m, l.meta.gen.Load())
		}
		if _, ok := n.settings(l.meta.gen.Load(), e.clock.Now()); !ok {
			t.Fatal("the renewed memo does not serve")
		}
	})
}
