package httplimit

import (
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

// available gives the units a state holds and the whole seconds until one
// more comes: the draft's "r" and "t".
func TestAvailable(t *testing.T) {
	perMinute := func(n int64) limiter.Limit { return limiter.PerMinute("x", n) }
	ms := time.Millisecond
	for _, c := range []struct {
		name  string
		s     limiter.LimitState
		delta int64
		r, t  int64
	}{
		{"60 a minute emptied: the next token in 1 s", limiter.LimitState{Limit: perMinute(60), Reset: time.Minute}, 0, 0, 1},
		{"3 a minute, one taken: the next in 20 s", limiter.LimitState{Limit: perMinute(3), Remaining: 2, Reset: 20 * time.Second}, 0, 2, 20},
		{"full: one token's time", limiter.LimitState{Limit: perMinute(3), Remaining: 3}, 0, 3, 20},
		{"7 a minute, one taken (8,571.4 ms, Reset rounded up)", limiter.LimitState{Limit: perMinute(7), Remaining: 6, Reset: 8572 * ms}, 0, 6, 9},
		{"7 a minute, a second later", limiter.LimitState{Limit: perMinute(7), Remaining: 6, Reset: 7572 * ms}, 0, 6, 8},
		{"30 tokens of debt: 31 s to one token", limiter.LimitState{Limit: perMinute(60), Remaining: -30, Reset: 90 * time.Second}, 0, 0, 31},
		{"charged 2 more", limiter.LimitState{Limit: perMinute(3), Remaining: 2, Reset: 20 * time.Second}, 2, 0, 20},
		{"charged more from full", limiter.LimitState{Limit: perMinute(3), Remaining: 3}, 1, 2, 20},
		{"refunded to full", limiter.LimitState{Limit: perMinute(3), Remaining: 1, Reset: 40 * time.Second}, -5, 3, 20},
		{"fast limit", limiter.LimitState{Limit: perMinute(1000), Remaining: 900, Reset: 6 * time.Second}, 0, 900, 1},
		{"two shards of 30 a minute each", limiter.LimitState{Limit: perMinute(60), Shards: 2, Reset: time.Minute}, 0, 0, 2},
		{"reserved tokens count in r", limiter.LimitState{Limit: perMinute(60), Remaining: 5, Reserved: 5, Reset: time.Minute}, 0, 5, 1},
		{"the zero state", limiter.LimitState{}, 0, 0, 1},
		{"an endless debt: Reset saturates", limiter.LimitState{Limit: limiter.PerDay("x", 1), Remaining: -limiter.MaxTokens, Reset: limiter.MaxRetryAfter}, 0, 0, int64(limiter.MaxRetryAfter / time.Second)},
		{"a debt beyond an Integer", limiter.LimitState{Limit: limiter.Limit{Name: "x", Capacity: 1, Refill: 1, Period: 366 * 24 * time.Hour}, Remaining: -limiter.MaxTokens, Reset: limiter.MaxRetryAfter}, limiter.MaxTokens, 0, maxSFInteger},
	} {
		if r, tt := available(c.s, c.delta); r != c.r || tt != c.t {
			t.Errorf("%s: r=%d;t=%d, want r=%d;t=%d", c.name, r, tt, c.r, c.t)
		}
	}
}
