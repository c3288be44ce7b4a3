package limiter

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
	"github.com/shardlimit/limiter/store/storetest"
)

// script injects faults into the writes of chosen items: faults[pk][i] is
// what the i-th write (Update or Put) of that partition key gets, counted
// from when the script is armed.
type script struct {
	mu     sync.Mutex
	armed  bool
	faults map[string][]memsim.Fault
	seen   map[string]int
}

func newScript() *script {
	return &script{faults: map[string][]memsim.Fault{}, seen: map[string]int{}}
}

func (s *script) on(pk string, faults ...memsim.Fault) { s.faults[pk] = faults }

func (s *script) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

func (s *script) injector() memsim.Injector {
	return memsim.Func("script", func(op memsim.Op) memsim.Decision {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.armed || (op.Kind != memsim.OpUpdate && op.Kind != memsim.OpPut) {
			return memsim.Decision{}
		}
		pk := op.Keys[0].PK
		i := s.seen[pk]
		s.seen[pk]++
		if f := s.faults[pk]; i < len(f) {
			return memsim.Decision{Fault: f[i]}
		}
		return memsim.Decision{}
	})
}

var (
	childPK  = keys.Bucket{Namespace: "ns", Entity: "key-1", Resource: "gpt-4"}.PK()
	parentPK = keys.Bucket{Namespace: "ns", Entity: "project-1", Resource: "gpt-4"}.PK()
)

// Cascade loses the outcome (1): the parent refuses while the child's
// charge may stand, because the child's refund is refused by throttles
// every time, or because the child's own write timed out after applying.
// The caller must hear that the outcome is unknown, and only that: an
// answer that matched ErrRateLimited too would tell a caller who tests it
// first that nothing was charged. Having been refused, it is never failed
// open.
func TestRegressionCascadeUnknownIsNeverARefusal(t *testing.T) {
	for name, child := range map[string][]memsim.Fault{
		"undo throttled":        {memsim.FaultNone, memsim.FaultThrottle, memsim.FaultThrottle, memsim.FaultThrottle},
		"child write timed out": {memsim.FaultLostResponse},
	} {
		sc := newScript()
		e, setup := cascadeEnv(t, memsim.WithFaults(sc.injector()))
		for i := 0; i < 10; i++ { // the project's 10 a minute are spent
			e.mustAcquire(setup, req("key-1", rpm(100), one))
		}
		e.mustAcquire(setup, req("key-2", rpm(100), one)) // a bucket below its burst, no parent
		for _, policy := range []Policy{FailClosed, FailOpen} {
			l := e.limiter(WithPolicy(policy)) // no memory of the items: both writes go out
			// Its first write found a bucket below its burst: its first
			// writes to the items are the consumption-only ones, which
			// apply whatever the bucket's state.
			e.mustAcquire(l, req("key-2", rpm(100), one))
			sc.seen = map[string]int{}
			sc.on(childPK, child...)
			sc.arm()
			before := e.consumed("key-1", "gpt-4", "rpm")
			lease, err := l.Acquire(e.ctx, req("key-1", rpm(100), one))
			var u *UnavailableError
			var rl *RateLimitedError
			switch {
			case lease != nil:
				t.Fatalf("%s, policy %d: a lease, want an error", name, policy)
			case !errors.Is(err, ErrUnavailable) || !store.OutcomeUnknown(err):
				t.Fatalf("%s, policy %d: %v, want an unavailability whose outcome is unknown", name, policy, err)
			case errors.Is(err, ErrRateLimited) || errors.As(err, &rl):
				t.Fatalf("%s, policy %d: %v matches ErrRateLimited: an unknown outcome is never also a refusal", name, policy, err)
			case !errors.As(err, &u) || u.Refusal == nil || !u.Refusal.Parent || u.Refusal.RetryAfter <= 0:
				t.Fatalf("%s, policy %d: %v: want the parent's refusal, with its wait, in Refusal", name, policy, err)
			case e.last().Outcome != Unavailable:
				t.Fatalf("%s, policy %d: observed outcome %v, want Unavailable", name, policy, e.last().Outcome)
			}
			if got := e.consumed("key-1", "gpt-4", "rpm") - before; got != 1000 {
				t.Fatalf("%s, policy %d: the child's charge stands (%d millitokens): the error said it may", name, policy, got)
			}
			sc.armed = false
		}
	}
}

// Cascade loses the outcome (2): the caller's context is cancelled while
// the parent refuses; the child's refund still runs, on a context of its
// own.
func TestRegressionCascadeUndoOutlivesTheCallersContext(t *testing.T) {
	var cancel context.CancelFunc
	cancelOn := ""
	hook := func(ctx context.Context, op memsim.Op) {
		if op.Kind == memsim.OpUpdate && op.Keys[0].PK == cancelOn {
			cancel() // the parent's write is in flight: the caller gives up
		}
	}
	e, setup := cascadeEnv(t, memsim.WithHook(hook))
	for i := 0; i < 10; i++ {
		e.mustAcquire(setup, req("key-1", rpm(100), one))
	}
	l := e.limiter()
	before := e.consumed("key-1", "gpt-4", "rpm")
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	cancel = stop
	cancelOn = parentPK
	_, err := l.Acquire(ctx, req("key-1", rpm(100), one))
	cancelOn = ""
	if err == nil {
		t.Fatal("the parent is spent: want an error")
	}
	if got := e.consumed("key-1", "gpt-4", "rpm") - before; got != 0 {
		t.Fatalf("child charged %d millitokens although the acquire failed: the undo did not run", got)
	}
}

// Cascade loses the outcome (3): a parent write that may have applied
// (5xx after apply) is an unknown outcome, whatever the child did.
func TestRegressionCascadeParentUnknownOutcome(t *testing.T) {
	sc := newScript()
	e, setup := cascadeEnv(t, memsim.WithFaults(sc.injector()))
	e.mustAcquire(setup, req("key-1", rpm(100), one))
	sc.on(parentPK, memsim.Fault5xxAfterApply)
	sc.arm()
	l := e.limiter(WithPolicy(FailClosed))
	_, err := l.Acquire(e.ctx, req("key-1", rpm(100), one))
	if !store.OutcomeUnknown(err) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("%v, want an unavailability whose outcome is unknown", err)
	}
}

// A cancelled or expired caller context is never failed open: no I/O
// happens, and the context's error comes back.
func TestRegressionCancelledContextIsNotFailedOpen(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithPolicy(FailOpen))
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	le, err := l.Acquire(ctx, req("k1", rpm(10), one))
	if le != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: lease %v, err %v; want no lease and context.Canceled", le, err)
	}
	if n := e.st.Totals().Requests; n != 0 {
		t.Fatalf("%d store requests for a cancelled call", n)
	}
	dctx, cancel2 := context.WithDeadline(e.ctx, time.Unix(0, 0))
	defer cancel2()
	if le, err := l.Acquire(dctx, req("k1", rpm(10), one)); le != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired: lease %v, err %v", le, err)
	}
}

// An adjust that would overflow a stored number is a validation error
// (bad input), not an unavailable store.
func TestRegressionAdjustOverflowIsValidation(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	le := e.mustAcquire(l, req("k1", rpm(10), one))
	k := keys.Bucket{Namespace: "ns", Entity: "k1", Resource: "gpt-4"}.Key()
	u := storetest.Build(t, store.Update{}.Set("b_rpm_tk", store.Int(math.MinInt64+1)).Set("b_rpm_tc", store.Int(math.MaxInt64-1)), store.Condition{})
	if _, err := e.st.Update(e.ctx, store.UpdateInput{Key: k, Expr: u}); err != nil {
		t.Fatal(err)
	}
	err := le.Adjust(e.ctx, map[string]int64{"rpm": 5})
	if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("%v, want a ValidationError", err)
	}
}

// Sharded buckets and TTL: DynamoDB deletes expired items one by one, in
// no order, any time after their ttl. Shard 0 of a 4-shard bucket is gone
// while shards 1-3 live on with their tokens. New processes (which believe
// in one shard) make shard 0 again at one shard, full, in one call; the
// old process still remembers 4 shards, and took the old shards' tokens
// as well: 695 tokens admitted at one instant against a burst of 400. Its
// image of shard 0 is older than any shard 0 outlives it by, so it writes
// shard 0 first and learns the count there: the old shards are never
// written again.
func TestRegressionShardedBucketTTL(t *testing.T) {
	e := newEnv(t, memsim.WithPartitionLimits(0, 0))
	limits := []Limit{PerSecond("rps", 400)}
	l := e.limiter()
	e.mustAcquire(l, Request{Entity: "hot", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}})
	ref := keys.Bucket{Namespace: "ns", Entity: "hot", Resource: "r"}
	if _, err := e.st.Update(e.ctx, keys.DoubleShards(ref, 1, keys.LimitsOf(e.st.Peek(ref.Key())))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Update(e.ctx, keys.DoubleShards(ref, 2, keys.LimitsOf(e.st.Peek(ref.Key())))); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(2 * time.Second) // every shard full: 100 each
	// Fill every shard: acquire until refused, from clients that know the count.
	for i := 0; i < 2000; i++ {
		if _, err := l.Acquire(e.ctx, Request{Entity: "hot", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}}); err != nil {
			break
		}
	}
	ttl, _ := e.bucketItem("hot", "r", 0).Int(store.AttrTTL)
	e.clock.Set(time.Unix(ttl+1, 0)) // shard 0 expires first
	if _, err := e.st.Delete(e.ctx, store.DeleteInput{Key: ref.WithShard(0).Key()}); err != nil {
		t.Fatal(err)
	}
	var before []store.Item
	for s := 1; s < 4; s++ {
		before = append(before, e.bucketItem("hot", "r", s))
	}
	admitted := 0
	for i := 0; i < 2000; i++ {
		nl := e.limiter() // new processes: one shard as far as they know
		if _, err := nl.Acquire(e.ctx, Request{Entity: "hot", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}}); err == nil {
			admitted++
		}
		if _, err := l.Acquire(e.ctx, Request{Entity: "hot", Resource: "r", Limits: limits, Consume: map[string]int64{"rps": 1}}); err == nil {
			admitted++
		}
	}
	if admitted > 400 {
		t.Fatalf("%d admitted at one instant against a burst of 400", admitted)
	}
	for s := 1; s < 4; s++ {
		if !reflect.DeepEqual(e.bucketItem("hot", "r", s), before[s-1]) {
			t.Fatalf("shard %d, left over from before shard 0 expired, was written", s)
		}
	}
}

// Debt forgotten at TTL: the expiry must cover the time until the bucket
// is full again, debt included, so a debt deeper than one burst is not
// forgiven when DynamoDB deletes the item.
func TestRegressionDebtForgottenAtTTL(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	limits := []Limit{PerMinute("tpm", 100)}
	le := e.mustAcquire(l, Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"tpm": 100}})
	if err := le.Adjust(e.ctx, map[string]int64{"tpm": 500}); err != nil { // 5 bursts of debt: 6 minutes to full
		t.Fatal(err)
	}
	ttl, _ := e.bucketItem("k", "r", 0).Int(store.AttrTTL)
	full := t0.Add(6 * time.Minute).Unix()
	if ttl <= full {
		t.Fatalf("ttl %d is before the bucket is full again (%d)", ttl, full)
	}
	// A later refill write keeps the debt in the expiry.
	e.clock.Add(time.Minute)
	if _, err := l.Acquire(e.ctx, Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"tpm": 1}}); err == nil {
		t.Fatal("in debt: want a refusal")
	}
	ttl, _ = e.bucketItem("k", "r", 0).Int(store.AttrTTL)
	if ttl <= full {
		t.Fatalf("after a minute: ttl %d is before the bucket is full again (%d)", ttl, full)
	}
}

// Methods on a nil or zero Lease return an error instead of panicking.
func TestRegressionNilLease(t *testing.T) {
	ctx := context.Background()
	for name, le := range map[string]*Lease{"nil": nil, "zero": {}} {
		if err := le.Adjust(ctx, map[string]int64{"rpm": 1}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s Adjust: %v", name, err)
		}
		if err := le.Rollback(ctx); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s Rollback: %v", name, err)
		}
		if err := le.Commit(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s Commit: %v", name, err)
		}
		_ = le.FailedOpen()
		_ = le.Shard()
		_ = le.Limits()
	}
	var l *Limiter
	if _, err := l.Acquire(ctx, req("k", rpm(1), one)); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil limiter: %v", err)
	}
}

// A Rollback refused by a throttle (certainly not applied) leaves the
// lease usable: a second Rollback returns the tokens, once.
func TestRegressionRollbackThrottledIsRetryable(t *testing.T) {
	sc := newScript()
	e := newEnv(t, memsim.WithFaults(sc.injector()))
	l := e.limiter()
	le := e.mustAcquire(l, req("k1", rpm(10), map[string]int64{"rpm": 3}))
	sc.on(keys.Bucket{Namespace: "ns", Entity: "k1", Resource: "gpt-4"}.PK(), memsim.FaultThrottle)
	sc.arm()
	if err := le.Rollback(e.ctx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("throttled rollback: %v", err)
	}
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatalf("retried rollback: %v", err)
	}
	if got := e.consumed("k1", "gpt-4", "rpm"); got != 0 {
		t.Fatalf("tc = %d after the rollback, want 0", got)
	}
	if err := le.Rollback(e.ctx); !errors.Is(err, ErrLeaseEnded) {
		t.Fatalf("third rollback: %v", err)
	}
}

// Outages under fail-open: after repeated failures the limiter stops
// calling the store for a short, jittered while and answers at once (the
// Event says so and carries the cause); then one call probes again.
func TestRegressionBreakerUnderOutage(t *testing.T) {
	down := true
	e := newEnv(t, memsim.WithFaults(memsim.Func("outage", func(memsim.Op) memsim.Decision {
		if down {
			return memsim.Decision{Fault: memsim.Fault5xxBeforeApply}
		}
		return memsim.Decision{}
	})))
	l := e.limiter(WithPolicy(FailOpen))
	for i := 0; i < breakerFailures; i++ {
		le, err := l.Acquire(e.ctx, req("k1", rpm(10), one))
		if err != nil || !le.FailedOpen() {
			t.Fatalf("fail-open: %v", err)
		}
		if ev := e.last(); ev.Err == nil || ev.BreakerOpen {
			t.Fatalf("a fail-open event carries the cause: %+v", ev)
		}
	}
	calls := e.st.Totals().Requests
	le, err := l.Acquire(e.ctx, req("k1", rpm(10), one))
	if err != nil || !le.FailedOpen() || !e.last().BreakerOpen || !errors.Is(e.last().Err, ErrBreakerOpen) {
		t.Fatalf("breaker open: %v %+v", err, e.last())
	}
	if e.st.Totals().Requests != calls {
		t.Fatal("an open breaker calls the store")
	}
	down = false
	e.clock.Add(1600 * time.Millisecond) // past the longest jittered interval
	e.mustAcquire(l, req("k1", rpm(10), one))
	if e.last().BreakerOpen || e.last().Path == PathFailOpen {
		t.Fatalf("the probe should reach the store: %+v", e.last())
	}
}

// Cascade loses the outcome (3), with a shadow parent: the project's 10 a
// minute are being tried in shadow, so their refusal is no refusal, but
// the key's refund is throttled every time. Without the shadow limit the
// acquire would have been admitted: it is, on a second try that skips it,
// as for several resources (Request.Also). The key's first charge stands
// (it paid twice), and the observer's Err says that it may.
func TestRegressionCascadeShadowRefusalWithAStandingChargeIsRetried(t *testing.T) {
	sc := newScript()
	e, setup := cascadeEnv(t, memsim.WithFaults(sc.injector()))
	for i := 0; i < 10; i++ { // the project's 10 a minute are spent
		e.mustAcquire(setup, req("key-1", rpm(100), one))
	}
	shadow := rpm(10)
	shadow[0].Shadow = true
	if err := setup.putLimits(e.ctx, scope{Entity: "project-1"}, shadow); err != nil {
		t.Fatal(err)
	}
	e.mustAcquire(setup, req("key-2", rpm(100), one))
	l := e.limiter() // no memory of the items: both writes go out
	e.mustAcquire(l, req("key-2", rpm(100), one))
	sc.on(childPK, memsim.FaultNone, memsim.FaultThrottle, memsim.FaultThrottle, memsim.FaultThrottle)
	sc.arm()
	before := e.consumed("key-1", "gpt-4", "rpm")
	lease, err := l.Acquire(e.ctx, req("key-1", rpm(100), one))
	if err != nil || lease == nil {
		t.Fatalf("%v: the shadow parent refused; want a lease", err)
	}
	ev := e.last()
	if ev.Outcome != Admitted || !slices.Equal(ev.WouldRefuse, []string{"parent:rpm"}) || !errors.Is(ev.Err, engine.ErrUndoFailed) {
		t.Fatalf("event %+v: want admitted, parent:rpm would refuse, Err the failed compensation", ev)
	}
	if got := e.consumed("key-1", "gpt-4", "rpm") - before; got != 2000 {
		t.Fatalf("the key was charged %d millitokens, want 2000 (the first try's charge stands)", got)
	}
}

// The read an acquire makes after its quota transfer landed (the
// transaction returns no item) only teaches the memory: the acquire is
// decided. A caller who has gone is not kept waiting for it (no store
// call), and a caller who cancels while it is in flight does not stop it:
// the lease for the charge that landed is the answer, not the context's
// error with the charge standing (found by TestProperty: a lease
// answered to a caller whose cancellation that read met).
func TestADecidedAcquiresReadIgnoresTheCallersContext(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	k := keys.Bucket{Namespace: "ns", Entity: "k1", Resource: "gpt-4"}.Key()
	read := &engine.Call{BatchGet: &store.BatchGetInput{Keys: []store.Key{k}, ConsistentRead: true}, Decided: true}
	gone, cancel := context.WithCancel(e.ctx)
	cancel()
	before := e.st.Totals().Requests
	if r := l.call(gone, &trace{}, read, 0); !errors.Is(r.Err, context.Canceled) || e.st.Totals().Requests != before {
		t.Fatalf("caller gone: err %v, %d store requests; want context.Canceled and none", r.Err, e.st.Totals().Requests-before)
	}
	bs := blockingStore{Store: e.st, entered: make(chan struct{}, 1)}
	l.st = bs
	if r := l.call(e.ctx, &trace{}, read, 0); r.Err != nil {
		t.Fatalf("the read on a live caller's context: %v", r.Err)
	}
	select {
	case <-bs.entered:
		t.Fatal("the read ran on a context the caller can cancel")
	default:
	}
}
