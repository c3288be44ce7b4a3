package bucket

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

// 100 tokens a minute: 100000 millitokens per 60000 ms, 5/3 mt per ms.
var perMinute100 = Limit{Capacity: 100_000, Burst: 100_000, RefillAmount: 100_000, RefillPeriod: 60_000}

func TestRefillTimeVectors(t *testing.T) {
	for _, c := range []struct {
		l              Limit
		amount, lo, hi int64
	}{
		{perMinute100, 1000, 600, 600},                            // 1 token: 1000*60000/100000 = 600 exactly
		{perMinute100, 1, 0, 1},                                   // 1 mt: 0.6 ms -> 0 and 1
		{perMinute100, 3000, 1800, 1800},                          // 3 tokens
		{perMinute100, 1666, 999, 1000},                           // 999.6 ms
		{perMinute100, 0, 0, 0},                                   // nothing to wait for
		{perMinute100, -5, 0, 0},                                  // a refund takes no time
		{Limit{RefillPeriod: 1}, 1, MaxRefillTime, MaxRefillTime}, // never refills
		{Limit{RefillAmount: -1000, RefillPeriod: 1000}, 1, MaxRefillTime, MaxRefillTime}, // below 1: never refills either
		{Limit{RefillAmount: 1, RefillPeriod: MaxRefillPeriod}, MaxTokens, MaxRefillTime, MaxRefillTime},
	} {
		lo, hi := c.l.RefillTime(c.amount)
		if lo != c.lo || hi != c.hi {
			t.Errorf("%+v.RefillTime(%d) = %d, %d; want %d, %d", c.l, c.amount, lo, hi, c.lo, c.hi)
		}
	}
}

func TestFullAtVectors(t *testing.T) {
	const rf = 1_700_000_000_000
	for _, c := range []struct {
		tk, want int64
	}{
		{100_000, rf},                       // full already
		{150_000, rf},                       // above a lowered burst: full
		{99_000, rf + 600},                  // one token short: 600 ms
		{90_000, rf + 6000},                 // ten tokens: 6 s
		{99_999, rf + 1},                    // 0.6 ms rounds up to 1
		{-100_000, rf + 120_000},            // a burst of debt: two minutes
		{math.MinInt64, rf + MaxRefillTime}, // saturates
	} {
		if got := (State{Limit: perMinute100, Tokens: c.tk}).FullAt(rf); got != c.want {
			t.Errorf("FullAt with tk %d = rf%+d, want rf%+d", c.tk, got-rf, c.want-rf)
		}
	}
}

// RefillTime brackets the exact quotient, FullAt is the first instant the
// bucket is full (1 ms earlier it is not), for any state within bounds.
func TestRefillTimeAndFullAtProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := Limit{
			Burst:        rapid.Int64Range(1, MaxTokens).Draw(t, "burst"),
			RefillAmount: rapid.Int64Range(1, MaxTokens).Draw(t, "ra"),
			RefillPeriod: rapid.Int64Range(1, MaxRefillPeriod).Draw(t, "rp"),
		}
		l.Capacity = l.Burst
		amount := rapid.Int64Range(0, MaxTokens).Draw(t, "amount")
		lo, hi := l.RefillTime(amount)
		exact := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(amount), big.NewInt(l.RefillPeriod)), big.NewInt(l.RefillAmount))
		if hi < MaxRefillTime {
			if new(big.Rat).SetInt64(lo).Cmp(exact) > 0 || new(big.Rat).SetInt64(hi).Cmp(exact) < 0 || hi-lo > 1 {
				t.Fatalf("RefillTime(%d) = [%d, %d] does not bracket %s", amount, lo, hi, exact.FloatString(3))
			}
		}
		s := State{Limit: l, Tokens: rapid.Int64Range(-MaxTokens, MaxTokens).Draw(t, "tk")}
		rf := rapid.Int64Range(0, 1<<45).Draw(t, "rf")
		at := s.FullAt(rf)
		if at < rf {
			t.Fatalf("FullAt %d before rf %d", at, rf)
		}
		if at-rf < MaxRefillTime {
			if s.Effective(rf, at) != l.Burst {
				t.Fatalf("not full at FullAt")
			}
			if at > rf && s.Effective(rf, at-1) == l.Burst {
				t.Fatalf("already full 1 ms before FullAt")
			}
		}
	})
}
