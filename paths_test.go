package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

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

// The same race through Acquire: a memsim hook lets A's write land just
// before B's. Too few tokens are stored for either, the refill since rf
// pays both: each takes the consumption-only write (the refill route), no
// lock, no retry, and the refill counts once. (The retry after a lost rf
// race is the engine's TestChargePaths.)
func TestTwoWritersShareTheRefillWithoutALock(t *testing.T) {
	var a *Limiter
	var e *env
	var bUpdates int
	racing := false
	hook := func(ctx context.Context, op memsim.Op) {
		if racing || op.Kind != memsim.OpUpdate {
			return
		}
		bUpdates++
		if bUpdates == 1 { // B's write is next: A gets there first
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
	e.mustAcquire(setup, req("k2", rpm(100), map[string]int64{"rpm": 95}))
	e.mustAcquire(b, req("k2", rpm(100), map[string]int64{"rpm": 1})) // B found a bucket below its burst
	racing = false
	e.clock.Add(30 * time.Second) // refill 50: 4 + 50 = 54 available
	bUpdates = 0
	e.events = nil
	e.mustAcquire(b, req("k1", rpm(100), map[string]int64{"rpm": 6}))
	// Both consume from the refill without moving rf (the refill route):
	// neither excludes the other.
	if got := e.last().Path; got != PathSpeculative {
		t.Fatalf("B took path %v, want speculative", got)
	}
	// 4 - 6 (A) - 6 (B) = -8 stored at the old rf; with the 50 refilled
	// since, 42 tokens: the refill credited once.
	if got := e.tokens("k1", "gpt-4", "rpm"); got != -8_000 {
		t.Fatalf("tk = %d, want -8000", got)
	}
}

// An exhausted bucket is refused from the item the failed write returned:
// no further I/O. The error says which limit, how much was asked and held,
// and how long to wait; waiting exactly that long succeeds, 1 ms less does
// not. A client that saw the item drained refuses without a write at all.
func TestFastRejectAndRetryAfter(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	limits := []Limit{PerMinute("rpm", 100), PerMinute("tpm", 1000)}
	e.mustAcquire(l, req("k1", limits, map[string]int64{"rpm": 1, "tpm": 990}))
	cold := e.limiter()
	e.mustReject(cold, req("k1", limits, map[string]int64{"rpm": 1, "tpm": 50}))
	if ev := e.last(); ev.Path != PathReject || ev.WriteUnits != 1 {
		t.Fatalf("a client without the item refuses from the failed write: %+v", ev)
	}
	rl := e.mustReject(l, req("k1", limits, map[string]int64{"rpm": 1, "tpm": 50}))
	e.expectCost(PathLocal, 0, 0, 0)
	if !rl.Local {
		t.Fatal("a refusal answered from the client's last item says so")
	}
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

// A refill due: the speculative write of a client without the item (whose
// first writes found buckets below their burst) is paid by the refill
// since rf (the refill route): 1 write, rf unmoved. A client that knows
// the item makes the same write: 1 round trip, 0 RCU, 1 WCU.
func TestARefillDueCostsOneWriteFromTheRefill(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", rpm(60), map[string]int64{"rpm": 60}))
	e.clock.Add(10 * time.Second) // 10 tokens refilled, not full
	other := e.limiter()          // no cached image of k1: tries the speculative path
	e.mustAcquire(l, req("k2", rpm(60), map[string]int64{"rpm": 30}))
	e.mustAcquire(other, req("k2", rpm(60), map[string]int64{"rpm": 1})) // found below its burst
	e.mustAcquire(other, req("k1", rpm(60), map[string]int64{"rpm": 5}))
	// Cold client: the configuration read, then one write.
	if ev := e.last(); ev.Path != PathSpeculative || ev.RoundTrips != 2 || ev.WriteUnits != 1 {
		t.Fatalf("cold refill acquire: %+v", ev)
	}
	e.mustAcquire(other, req("k1", rpm(60), map[string]int64{"rpm": 1}))
	e.expectCost(PathSpeculative, 1, 0, 1)
	e.clock.Add(3 * time.Second) // 4 left + 3 refilled: need 6
	e.mustAcquire(other, req("k1", rpm(60), map[string]int64{"rpm": 6}))
	e.expectCost(PathSpeculative, 1, 0, 1)
	// -12 stored at T0; 13 refilled since: 1 left.
	if got := e.tokens("k1", "gpt-4", "rpm"); got != -12_000 {
		t.Fatalf("tk = %d, want -12000", got)
	}
}

// rf never moves backwards: a client whose clock lags writes max(rf, now),
// so another client cannot credit the same stretch of refill twice. Here
// the full write moves rf to T0+70s; the laggard (5 s behind) consumes
// what it set without moving rf. The normal write of a lagging client is
// the engine's TestLaggingClientNeverMovesRefillBack.
func TestLaggingClockNeverMovesRefillBack(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k1", rpm(60), map[string]int64{"rpm": 60}))
	e.clock.Add(70 * time.Second)                                    // full again since T0+60s
	e.mustAcquire(l, req("k1", rpm(60), map[string]int64{"rpm": 5})) // rf = T0+70s
	lag := &offsetClock{c: e.clock, d: -5 * time.Second}
	laggard := e.limiter(WithClock(lag))
	e.mustAcquire(laggard, req("k1", rpm(60), map[string]int64{"rpm": 55}))
	rf, _ := e.bucketItem("k1", "gpt-4", 0).Int("rf")
	if want := t0.Add(70 * time.Second).UnixMilli(); rf != want {
		t.Fatalf("rf = %d, want %d (never backwards)", rf, want)
	}
	if got := e.tokens("k1", "gpt-4", "rpm"); got != 0 {
		t.Fatalf("tk = %d, want 0: 60 set, 60 consumed", got)
	}
}

type offsetClock struct {
	c interface{ Now() time.Time }
	d time.Duration
}

func (o *offsetClock) Now() time.Time { return o.c.Now().Add(o.d) }
