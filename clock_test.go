package limiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/store/memsim"
)

// benbjohnson/clock's clocks satisfy limiter.Clock; its Mock drives refill
// in unit tests. (The simulator keeps its own virtual time: Mock.Add sleeps
// a millisecond of real time per call.)
func TestBenbjohnsonClockDrivesRefill(t *testing.T) {
	var _ limiter.Clock = clock.New()
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim, err := limiter.New(memsim.New(memsim.WithClock(mock)), limiter.WithClock(mock))
	if err != nil {
		t.Fatal(err)
	}
	r := limiter.Request{Entity: "k", Resource: "r", Limits: []limiter.Limit{limiter.PerSecond("rps", 1)}, Consume: map[string]int64{"rps": 1}}
	ctx := context.Background()
	if _, err := lim.Acquire(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := lim.Acquire(ctx, r); err == nil {
		t.Fatal("second acquire within the second was admitted")
	}
	mock.Add(time.Second)
	if _, err := lim.Acquire(ctx, r); err != nil {
		t.Fatalf("after a second of mock time: %v", err)
	}
}
