package limiter

import (
	"errors"
	"math"
	"testing"
	"time"
)

// A lease and a refusal report each limit's state from the item the write
// returned: no extra store call.
func TestStateOnEveryAnswer(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	limits := []Limit{PerMinute("rpm", 100), PerMinute("tpm", 1000)}
	if _, err := l.Acquire(e.ctx, Request{Entity: "k", Resource: "r", Limits: limits,
		Consume: map[string]int64{"rpm": 1, "tpm": 400}}); err != nil {
		t.Fatal(err)
	}
	lease, err := l.Acquire(e.ctx, Request{Entity: "k", Resource: "r", Limits: limits,
		Consume: map[string]int64{"rpm": 1, "tpm": 100}})
	if err != nil {
		t.Fatal(err)
	}
	if ev := e.last(); ev.RoundTrips != 1 {
		t.Fatalf("acquire took %d round trips, want 1", ev.RoundTrips)
	}
	got := lease.Limits()
	if len(got) != 2 || got[0].Limit.Name != "rpm" || got[1].Limit.Name != "tpm" {
		t.Fatalf("lease limits %+v", got)
	}
	// rpm: 98 left, 2 tokens refill in 1.2 s; tpm: 500 left, 500 in 30 s.
	if got[0].Remaining != 98 || got[0].Reset != 1200*time.Millisecond || got[0].Requested != 1 || got[0].Shards != 1 {
		t.Errorf("rpm state %+v, want remaining 98, reset 1.2s", got[0])
	}
	if got[1].Remaining != 500 || got[1].Reset != 30*time.Second || got[1].ResetSeconds() != 30 || got[1].Requested != 100 {
		t.Errorf("tpm state %+v, want remaining 500, reset 30s", got[1])
	}
	if got[0].Exceeded || got[0].RetryAfter != 0 {
		t.Errorf("an admitted limit is not exceeded: %+v", got[0])
	}

	_, err = l.Acquire(e.ctx, Request{Entity: "k", Resource: "r", Limits: limits,
		Consume: map[string]int64{"rpm": 1, "tpm": 700}})
	var rl *RateLimitedError
	if !errors.As(err, &rl) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if len(rl.Limits) != 2 || rl.Limits[1].Remaining != 500 || !rl.Limits[1].Exceeded ||
		rl.Limits[1].RetryAfter != 12*time.Second || rl.RetryAfterSeconds() != 12 {
		t.Errorf("refusal %+v", rl.Limits)
	}
	if rl.Limits[0].Exceeded {
		t.Errorf("rpm did not refuse: %+v", rl.Limits[0])
	}
}

func TestLeaseLimitsNil(t *testing.T) {
	var le *Lease
	if le.Limits() != nil || le.ParentLimits() != nil {
		t.Fatal("a nil lease has no limits")
	}
	var rl *RateLimitedError
	if rl.RetryAfterSeconds() != 0 {
		t.Fatal("a nil error has no wait")
	}
}

func TestSecondsRoundUp(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{{0, 0}, {-time.Second, 0}, {time.Nanosecond, 1}, {time.Second, 1}, {time.Second + 1, 2}, {90 * time.Second, 90}} {
		if got := ceilSeconds(c.d); got != c.want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

// Retry-after wraps: a wait beyond what a time.Duration holds saturates at
// MaxRetryAfter instead of wrapping to a negative or zero wait.
func TestRegressionRetryAfterWraps(t *testing.T) {
	for _, ms := range []int64{int64(MaxRetryAfter / time.Millisecond), math.MaxInt64 / 1000, math.MaxInt64} {
		if got := msDuration(ms); got != MaxRetryAfter {
			t.Errorf("msDuration(%d) = %v, want MaxRetryAfter", ms, got)
		}
	}
	e := newEnv(t)
	l := e.limiter()
	limits := []Limit{PerDay("day", 1)}
	lease, err := l.Acquire(e.ctx, Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"day": 1}})
	if err != nil {
		t.Fatal(err)
	}
	// A debt of 10^12 tokens at one a day is 2.7 billion years away.
	if err := lease.Adjust(e.ctx, map[string]int64{"day": MaxTokens}); err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(e.ctx, Request{Entity: "k", Resource: "r", Limits: limits, Consume: map[string]int64{"day": 1}})
	var rl *RateLimitedError
	if !errors.As(err, &rl) {
		t.Fatalf("want a refusal, got %v", err)
	}
	if rl.RetryAfter != MaxRetryAfter {
		t.Fatalf("retry after %v, want MaxRetryAfter", rl.RetryAfter)
	}
}
