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

var one = map[string]int64{"rpm": 1}

// A new bucket: the first acquire reads the configuration (once per cache
// TTL), misses with its speculative write and creates the bucket. From then
// on an admitted acquire is one write: 1 round trip, 0 RCU, 1 WCU.
func TestCreateThenSpeculativeCostsOneWrite(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", rpm(100), one))
	if got := e.last().Path; got != PathCreate {
		t.Fatalf("first acquire took path %v, want create", got)
	}
	if got := e.tokens("k1", "gpt-4", "rpm"); got != 99_000 {
		t.Fatalf("after create tk = %d, want 99000", got)
	}
	e.mustAcquire(l, req("k1", rpm(100), one))
	e.expectCost(PathSpeculative, 1, 0, 1)
	if got := e.tokens("k1", "gpt-4", "rpm"); got != 98_000 {
		t.Fatalf("tk = %d, want 98000", got)
	}
}

// A lightly used bucket is full whenever a request comes. The blind full
// write resets it in one write, instead of a failed speculative write and a
// refill (two).
func TestIdleBucketTakesTheFullPath(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", rpm(100), one))
	e.clock.Add(time.Second) // one token refills in 600 ms
	e.mustAcquire(l, req("k1", rpm(100), one))
	e.expectCost(PathFull, 1, 0, 1)
	if got := e.tokens("k1", "gpt-4", "rpm"); got != 99_000 {
		t.Fatalf("tk = %d, want 99000 (full minus one)", got)
	}
}

// The hole in plain lazy refill: a bucket idle long enough to be full is
// drained by speculative writes that do not move rf; a later refill would
// then credit the idle time again and admit a second burst at once. The
// fl guard refuses speculative writes into a full bucket, so a burst after
// idle admits exactly the burst.
func TestNoSecondBurstAfterIdle(t *testing.T) {
	e := newEnv(t)
	limits := rpm(10)
	e.mustAcquire(e.limiter(), req("k1", limits, one))
	e.clock.Add(time.Hour)
	admitted := 0
	for i := 0; i < 30; i++ {
		l := e.limiter() // every request from a fresh client: no cache, blind speculative writes
		if _, err := l.Acquire(e.ctx, req("k1", limits, one)); err == nil {
			admitted++
		} else if !errors.Is(err, ErrRateLimited) {
			t.Fatal(err)
		}
	}
	if admitted != 10 {
		t.Fatalf("a burst after an hour idle admitted %d, want exactly the burst of 10", admitted)
	}
}

// Seed 001's concurrency trace: capacity 100 a minute, 90 tokens at T0; at
// T1 = T0+1s two writers read the same item and consume 3 and 7. A wins the
// rf lock with refill + consumption; B loses it and retries with its
// consumption only. The refill of that second is counted once:
// 90 + floor(1000*100000/60000)/1000 - 3 - 7 = 81.666 tokens.
func TestSeedConcurrencyTraceCountsRefillOnce(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", rpm(100), map[string]int64{"rpm": 10})) // tk 90 at T0
	e.clock.Add(time.Second)

	p := newPlan(keys.Bucket{Namespace: "ns", Entity: "k1", Resource: "gpt-4"}, rpm(100), nil)
	key := p.ref.Key()
	out, err := e.st.Get(e.ctx, store.GetInput{Key: key, ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	seen, _ := decodeImage(out.Item) // both writers read this
	now := e.clock.Now().UnixMilli()
	tr := &trace{}

	a := p.withAmounts(map[string]int64{"rpm": 3000})
	exA, _ := a.normal(seen, 1, now, true)
	if _, err := l.update(e.ctx, tr, key, exA); err != nil {
		t.Fatalf("A's normal write: %v", err)
	}

	b := p.withAmounts(map[string]int64{"rpm": 7000})
	exB, _ := b.normal(seen, 1, now, true)
	_, err = l.update(e.ctx, tr, key, exB)
	fresh, err := l.conditionImage(err)
	if err != nil || fresh == nil || fresh.rf != now {
		t.Fatalf("B's normal write should lose the rf race and return the item: %v", err)
	}
	if !b.retryable(fresh, 1, now) {
		t.Fatal("after A's write nothing is left to refill: B must take the retry path")
	}
	exR, _ := b.speculative(1, now) // the retry path: consumption only
	if _, err := l.update(e.ctx, tr, key, exR); err != nil {
		t.Fatalf("B's retry: %v", err)
	}
	if got := e.tokens("k1", "gpt-4", "rpm"); got != 81_666 {
		t.Fatalf("final tk = %d, want 81666", got)
	}
	if got := e.consumed("k1", "gpt-4", "rpm"); got != 20_000 {
		t.Fatalf("tc = %d, want 20000 (10 + 3 + 7 tokens)", got)
	}
}

// The same race through Acquire: B's speculative write fails (too few
// stored tokens), B computes a refill from the returned item, and a memsim
// hook lets A win the rf lock just before B's normal write lands. B then
// retries with consumption only.
func TestRetryPathAfterLosingTheRefillRace(t *testing.T) {
	var a *Limiter
	var e *env
	var bUpdates int
	racing := false
	hook := func(ctx context.Context, op memsim.Op) {
		if racing || op.Kind != memsim.OpUpdate {
			return
		}
		bUpdates++
		if bUpdates == 2 { // B's normal write is next: A gets there first
			racing = true
			e.mustAcquire(a, req("k1", rpm(100), map[string]int64{"rpm": 6}))
			racing = false
		}
	}
	e = newEnv(t, memsim.WithHook(hook))
	racing = true
	setup := e.limiter()
	e.mustAcquire(setup, req("k1", rpm(100), map[string]int64{"rpm": 95})) // 5 left at T0
	a = e.limiter()
	b := e.limiter()
	e.mustAcquire(a, req("k1", rpm(100), map[string]int64{"rpm": 1})) // warm A's config cache
	racing = false
	e.clock.Add(30 * time.Second) // refill 50: 4 + 50 = 54 available
	bUpdates = 0
	e.events = nil
	e.mustAcquire(b, req("k1", rpm(100), map[string]int64{"rpm": 6}))
	if got := e.last().Path; got != PathRetry {
		t.Fatalf("B took path %v, want retry", got)
	}
	// 54 - 6 (A) - 6 (B) = 42 tokens, the refill credited once.
	if got := e.tokens("k1", "gpt-4", "rpm"); got != 42_000 {
		t.Fatalf("tk = %d, want 42000", got)
	}
}

// An exhausted bucket is refused from the item the failed write returned:
// no further I/O. The error says which limit, how much was asked and held,
// and how long to wait; waiting exactly that long succeeds, 1 ms less does
// not.
func TestFastRejectAndRetryAfter(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	limits := []Limit{PerMinute("rpm", 100), PerMinute("tpm", 1000)}
	e.mustAcquire(l, req("k1", limits, map[string]int64{"rpm": 1, "tpm": 990}))
	rl := e.mustReject(l, req("k1", limits, map[string]int64{"rpm": 1, "tpm": 50}))
	e.expectCost(PathReject, 1, 0, 1)
	if len(rl.Limits) != 2 || rl.Limits[1].Limit.Name != "tpm" || !rl.Limits[1].Exceeded || rl.Limits[0].Exceeded {
		t.Fatalf("statuses: %+v", rl.Limits)
	}
	if rl.Limits[1].Requested != 50 || rl.Limits[1].Remaining != 10 {
		t.Fatalf("tpm status: %+v", rl.Limits[1])
	}
	// 40 tokens at 1000/min: 2400 ms.
	if rl.RetryAfter != 2400*time.Millisecond {
		t.Fatalf("RetryAfter = %v, want 2.4s", rl.RetryAfter)
	}
	e.clock.Add(rl.RetryAfter - time.Millisecond)
	e.mustReject(l, req("k1", limits, map[string]int64{"rpm": 1, "tpm": 50}))
	e.clock.Add(time.Millisecond)
	e.mustAcquire(l, req("k1", limits, map[string]int64{"rpm": 1, "tpm": 50}))
	if !errors.Is(rl, ErrRateLimited) || rl.Error() == "" {
		t.Fatal("RateLimitedError must match ErrRateLimited and print")
	}
}

// A refill due: the speculative write fails, the normal write credits the
// refill and charges under the rf lock: 2 round trips, 0 RCU, 2 WCU.
func TestNormalPathCostsTwoWrites(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", rpm(60), map[string]int64{"rpm": 60}))
	e.clock.Add(10 * time.Second) // 10 tokens refilled, not full
	other := e.limiter()          // no cached image: tries the speculative path
	e.mustAcquire(other, req("k1", rpm(60), map[string]int64{"rpm": 5}))
	// Cold client: the configuration read, then the two writes.
	if ev := e.last(); ev.Path != PathNormal || ev.RoundTrips != 3 || ev.WriteUnits != 2 {
		t.Fatalf("cold refill acquire: %+v", ev)
	}
	e.mustAcquire(other, req("k1", rpm(60), map[string]int64{"rpm": 1}))
	e.expectCost(PathSpeculative, 1, 0, 1)
	e.clock.Add(3 * time.Second) // 4 left + 3 refilled: need 6
	e.mustAcquire(other, req("k1", rpm(60), map[string]int64{"rpm": 6}))
	e.expectCost(PathNormal, 2, 0, 2)
	if got := e.tokens("k1", "gpt-4", "rpm"); got != 1_000 {
		t.Fatalf("tk = %d, want 1000", got)
	}
}

// rf never moves backwards: a client whose clock lags writes max(rf, now),
// so another client cannot credit the same stretch of refill twice.
func TestLaggingClockNeverMovesRefillBack(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", rpm(60), map[string]int64{"rpm": 60}))
	e.clock.Add(10 * time.Second)
	e.mustAcquire(l, req("k1", rpm(60), map[string]int64{"rpm": 5})) // rf = T0+10s
	lag := &offsetClock{c: e.clock, d: -5 * time.Second}
	laggard := e.limiter(WithClock(lag))
	e.mustAcquire(laggard, req("k1", rpm(60), map[string]int64{"rpm": 5}))
	rf, _ := e.bucketItem("k1", "gpt-4", 0).Int("rf")
	if want := t0.Add(10 * time.Second).UnixMilli(); rf != want {
		t.Fatalf("rf = %d, want %d (never backwards)", rf, want)
	}
	if got := e.tokens("k1", "gpt-4", "rpm"); got != 0 {
		t.Fatalf("tk = %d, want 0: 10 refilled, 10 consumed", got)
	}
}

type offsetClock struct {
	c interface{ Now() time.Time }
	d time.Duration
}

func (o *offsetClock) Now() time.Time { return o.c.Now().Add(o.d) }
