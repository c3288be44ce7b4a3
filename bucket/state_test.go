package bucket

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// T0 is an arbitrary refill timestamp: 2024-01-23 08:53:20 UTC.
const T0 int64 = 1706000000000

// rpm100 is 100 tokens per minute: cp = bx = ra = 100000, rp = 60000.
var rpm100 = Limit{Capacity: 100_000, Burst: 100_000, RefillAmount: 100_000, RefillPeriod: 60_000}

// maxRate is the fastest limit within bounds: MaxTokens per millisecond.
var maxRate = Limit{Capacity: MaxTokens, Burst: MaxTokens, RefillAmount: MaxTokens, RefillPeriod: 1}

const tenYears int64 = 10 * 36525 * 24 * 60 * 60 * 1000 / 100 // 315,576,000,000 ms

func TestEffective(t *testing.T) {
	tests := []struct {
		name    string
		limit   Limit
		tk      int64
		rf, now int64
		want    int64 // Effective
		delta   int64 // RefillDelta
	}{
		{
			// The seed's trace: 1 s after rf, floor(1000*100000/60000) =
			// floor(1666.67) = 1666; 90000 + 1666 = 91666.
			name: "seed trace", limit: rpm100, tk: 90_000, rf: T0, now: T0 + 1000,
			want: 91_666, delta: 1_666,
		},
		{
			// The clock is 5 s behind rf: elapsed = max(0, -5000) = 0.
			name: "clock behind rf", limit: rpm100, tk: 90_000, rf: T0, now: T0 - 5000,
			want: 90_000, delta: 0,
		},
		{
			// now == rf: no refill.
			name: "no time passed", limit: rpm100, tk: 90_000, rf: T0, now: T0,
			want: 90_000, delta: 0,
		},
		{
			// A full minute refills 100000; 99000 + 100000 = 199000, capped
			// at bx = 100000.
			name: "burst cap", limit: rpm100, tk: 99_000, rf: T0, now: T0 + 60_000,
			want: 100_000, delta: 1_000,
		},
		{
			// Refill lands exactly on bx: 40000 + floor(36000*100000/60000)
			// = 40000 + 60000 = 100000.
			name: "exactly burst", limit: rpm100, tk: 40_000, rf: T0, now: T0 + 36_000,
			want: 100_000, delta: 60_000,
		},
		{
			// Debt of 50 tokens, 30 s refill floor(30000*100000/60000) = 50000:
			// -50000 + 50000 = 0.
			name: "negative tk with refill", limit: rpm100, tk: -50_000, rf: T0, now: T0 + 30_000,
			want: 0, delta: 50_000,
		},
		{
			// Debt of 100 tokens, 1 s: -100000 + 1666 = -98334, still negative.
			name: "negative tk stays negative", limit: rpm100, tk: -100_000, rf: T0, now: T0 + 1000,
			want: -98_334, delta: 1_666,
		},
		{
			// Burst lowered to 50000 under a stored 90000: min(90000 + 1666,
			// 50000) = 50000, so the write must ADD 50000 - 90000 = -40000.
			name:  "burst lowered below tk",
			limit: Limit{Capacity: 50_000, Burst: 50_000, RefillAmount: 100_000, RefillPeriod: 60_000},
			tk:    90_000, rf: T0, now: T0 + 1000,
			want: 50_000, delta: -40_000,
		},
		{
			// tk == bx: effective stays bx, delta 0.
			name: "full", limit: rpm100, tk: 100_000, rf: T0, now: T0 + 1000,
			want: 100_000, delta: 0,
		},
		{
			// Rounding down: 1 millitoken per 3 ms, 2 ms elapsed:
			// floor(2*1/3) = 0.
			name: "floor below one", limit: Limit{Capacity: 10, Burst: 10, RefillAmount: 1, RefillPeriod: 3},
			tk: 0, rf: T0, now: T0 + 2, want: 0, delta: 0,
		},
		{
			// floor(3*1/3) = 1.
			name: "floor at one", limit: Limit{Capacity: 10, Burst: 10, RefillAmount: 1, RefillPeriod: 3},
			tk: 0, rf: T0, now: T0 + 3, want: 1, delta: 1,
		},
		{
			// Idle 10 years at MaxTokens/ms: 315576000000 * 1e15 ~ 3.2e26
			// overflows 64 bits (computed in 128), capped at bx = 1e15.
			name: "10 years idle at max rate", limit: maxRate, tk: 0, rf: T0, now: T0 + tenYears,
			want: MaxTokens, delta: MaxTokens,
		},
		{
			// tk = MinInt64/2 = -4611686018427387904, 1 token/s for 1 s:
			// + floor(1000*1000/1000) = + 1000.
			name:  "tk near MinInt64/2",
			limit: Limit{Capacity: 1000, Burst: 1000, RefillAmount: 1000, RefillPeriod: 1000},
			tk:    math.MinInt64 / 2, rf: T0, now: T0 + 1000,
			want: math.MinInt64/2 + 1000, delta: 1000,
		},
		{
			// tk = MinInt64/2, 10 years at max rate: capped at bx; delta =
			// 1e15 + 4611686018427387904 = 4612686018427387904 fits.
			name: "tk near MinInt64/2, 10 years at max rate", limit: maxRate,
			tk: math.MinInt64 / 2, rf: T0, now: T0 + tenYears,
			want: MaxTokens, delta: 4_612_686_018_427_387_904,
		},
		{
			// tk = MinInt64: effective bx = 1e15 exactly; the true delta
			// 1e15 + 2^63 exceeds int64 and saturates.
			name: "tk MinInt64, delta saturates", limit: maxRate,
			tk: math.MinInt64, rf: T0, now: T0 + tenYears,
			want: MaxTokens, delta: math.MaxInt64,
		},
		{
			// tk = MinInt64 at 1 token/s for 1 s: MinInt64 + 1000, exact.
			name:  "tk MinInt64, small refill",
			limit: Limit{Capacity: 1000, Burst: 1000, RefillAmount: 1000, RefillPeriod: 1000},
			tk:    math.MinInt64, rf: T0, now: T0 + 1000,
			want: math.MinInt64 + 1000, delta: 1000,
		},
		{
			// tk = MaxInt64 above bx: effective bx, delta bx - MaxInt64.
			name: "tk MaxInt64", limit: rpm100, tk: math.MaxInt64, rf: T0, now: T0 + 1000,
			want: 100_000, delta: 100_000 - math.MaxInt64,
		},
		{
			// elapsed = MaxInt64 - MinInt64 = 2^64 - 1 ms does not overflow.
			name: "extreme timestamps", limit: rpm100, tk: 0, rf: math.MinInt64, now: math.MaxInt64,
			want: 100_000, delta: 100_000,
		},
		{
			// A per-shard limit with ra = 0 never refills.
			name: "zero refill", limit: Limit{Capacity: 0, Burst: 0, RefillAmount: 0, RefillPeriod: 1000},
			tk: -5, rf: T0, now: T0 + tenYears, want: -5, delta: 0,
		},
		{
			// Yearly limit: 1 token per 366 days, 183 days elapsed:
			// floor(15811200000*1000/31622400000) = 500.
			name: "max period", limit: Limit{Capacity: 1000, Burst: 1000, RefillAmount: 1000, RefillPeriod: MaxRefillPeriod},
			tk: 0, rf: T0, now: T0 + MaxRefillPeriod/2, want: 500, delta: 500,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := State{Limit: tt.limit, Tokens: tt.tk}
			if got := s.Effective(tt.rf, tt.now); got != tt.want {
				t.Errorf("Effective = %d, want %d", got, tt.want)
			}
			if got := s.RefillDelta(tt.rf, tt.now); got != tt.delta {
				t.Errorf("RefillDelta = %d, want %d", got, tt.delta)
			}
			if got := s.Refilled(tt.rf, tt.now).Tokens; got != tt.want {
				t.Errorf("Refilled.Tokens = %d, want %d", got, tt.want)
			}
			if !s.Allows(tt.rf, tt.now, tt.want) || s.Allows(tt.rf, tt.now, tt.want+1) {
				t.Errorf("Allows disagrees with Effective = %d", tt.want)
			}
		})
	}
}

// TestSeedTrace replays a concurrency trace: two writers read the same
// item 1 s after rf; A claims the refill and takes 3, B loses the rf race
// and only takes 7.
func TestSeedTrace(t *testing.T) {
	item := State{Limit: rpm100, Tokens: 90_000}
	rf, t1 := T0, T0+1000

	// A: Normal write, ADD refill-3000, SET rf = T1.
	if !item.Allows(rf, t1, 3000) {
		t.Fatal("A: 3000 not allowed")
	}
	item = item.Refilled(rf, t1).Charge(3000) // 90000 + 1666 - 3000 = 88666
	rf = t1
	if item.Tokens != 88_666 {
		t.Fatalf("after A: tk = %d, want 88666", item.Tokens)
	}

	// B read rf = T0 too; its Normal write fails on rf, the Retry takes 7000
	// with condition tk >= 7000 on the stored balance.
	if item.Tokens < 7000 {
		t.Fatal("B: retry condition fails")
	}
	item = item.Charge(7000) // 88666 - 7000 = 81666
	if item.Tokens != 81_666 || item.TotalConsumed != 10_000 {
		t.Fatalf("final tk = %d, tc = %d; want 81666, 10000", item.Tokens, item.TotalConsumed)
	}
	// 90000 + 1666 (refilled once) - 3000 - 7000.
	if got := item.Effective(rf, t1); got != 81_666 {
		t.Fatalf("effective = %d, want 81666", got)
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name    string
		limit   Limit
		tk      int64
		rf, now int64
		need    int64
		wait    int64
		ok      bool
	}{
		{
			// Empty, need 1 token: ceil(1000*60000/100000) = 600 ms.
			name: "empty", limit: rpm100, tk: 0, rf: T0, now: T0, need: 1000,
			wait: 600, ok: true,
		},
		{
			// 500 ms already elapsed (refill 833): the refill counts from rf,
			// so T = rf + 600 and the wait is 100.
			name: "partly refilled", limit: rpm100, tk: 0, rf: T0, now: T0 + 500, need: 1000,
			wait: 100, ok: true,
		},
		{
			// The clock is 400 ms behind rf: T = rf + 600 = now + 1000.
			name: "now before rf", limit: rpm100, tk: 0, rf: T0, now: T0 - 400, need: 1000,
			wait: 1000, ok: true,
		},
		{
			// 5000 stored, need 1000: available now.
			name: "available", limit: rpm100, tk: 5000, rf: T0, now: T0, need: 1000,
			wait: 0, ok: true,
		},
		{
			// Exactly available: 0 stored + floor(600*100000/60000) = 1000.
			name: "exactly available", limit: rpm100, tk: 0, rf: T0, now: T0 + 600, need: 1000,
			wait: 0, ok: true,
		},
		{
			// need 100001 > bx 100000: never.
			name: "need exceeds burst", limit: rpm100, tk: 100_000, rf: T0, now: T0, need: 100_001,
			wait: math.MaxInt64, ok: false,
		},
		{
			// need == bx from empty: a full minute.
			name: "need equals burst", limit: rpm100, tk: 0, rf: T0, now: T0, need: 100_000,
			wait: 60_000, ok: true,
		},
		{
			// Burst lowered below tk: effective is bx = 50000 >= 40000.
			name:  "tk above burst",
			limit: Limit{Capacity: 50_000, Burst: 50_000, RefillAmount: 100_000, RefillPeriod: 60_000},
			tk:    90_000, rf: T0, now: T0, need: 40_000, wait: 0, ok: true,
		},
		{
			// 3 millitokens per second, need 1: ceil(1*1000/3) = 334 ms;
			// floor(334*3/1000) = 1 but floor(333*3/1000) = 0.
			name: "ceil", limit: Limit{Capacity: 3, Burst: 3, RefillAmount: 3, RefillPeriod: 1000},
			tk: 0, rf: T0, now: T0, need: 1, wait: 334, ok: true,
		},
		{
			// Debt of 100 tokens, need 1: d = 101000,
			// ceil(101000*60000/100000) = 60600.
			name: "debt", limit: rpm100, tk: -100_000, rf: T0, now: T0, need: 1000,
			wait: 60_600, ok: true,
		},
		{
			// need 0 with debt 1 millitoken: ceil(1*60000/100000) = 1 ms.
			name: "need zero in debt", limit: rpm100, tk: -1, rf: T0, now: T0, need: 0,
			wait: 1, ok: true,
		},
		{
			// A per-shard limit with ra = 0 cannot refill.
			name: "zero refill short", limit: Limit{Burst: 10, RefillPeriod: 1000},
			tk: 5, rf: T0, now: T0, need: 6, wait: math.MaxInt64, ok: false,
		},
		{
			name: "zero refill enough", limit: Limit{Burst: 10, RefillPeriod: 1000},
			tk: 5, rf: T0, now: T0, need: 5, wait: 0, ok: true,
		},
		{
			// Debt of 2^63 at 1 millitoken per 366 days: about 2.9e29 ms;
			// saturates.
			name: "saturates", limit: Limit{Capacity: 1, Burst: 1, RefillAmount: 1, RefillPeriod: MaxRefillPeriod},
			tk: math.MinInt64, rf: T0, now: T0, need: 1, wait: math.MaxInt64, ok: true,
		},
		{
			// Debt MinInt64/2 at max rate: ceil((1000 + 2^62)*1/1e15) = 4612
			// ms (4611686018427388904 / 1e15 = 4611.69).
			name: "huge debt fast rate", limit: maxRate, tk: math.MinInt64 / 2, rf: T0, now: T0, need: 1000,
			wait: 4612, ok: true,
		},
		{
			// A period of 0 (no valid limit has one) never refills.
			name: "zero period", limit: Limit{Burst: 10, RefillAmount: 10},
			tk: 5, rf: T0, now: T0, need: 6, wait: math.MaxInt64, ok: false,
		},
		// The 128-bit arithmetic at its edges: e = ceil(d*rp/ra) past 2^64
		// while rf + e - now still fits, from the widest span of int64
		// clocks (rf the smallest, now the largest: 2^64 - 1 ms).
		{
			// d = 2^63 + 1000, rp 2, ra 1: e = 2^64 + 2000; the wait
			// borrows from e's high word.
			name: "e past 2^64, clocks far apart", limit: Limit{Burst: 1000, RefillAmount: 1, RefillPeriod: 2},
			tk: math.MinInt64, rf: math.MinInt64, now: math.MaxInt64, need: 1000, wait: 2001, ok: true,
		},
		{
			// d*rp = 2^65 - 1, ra 2: e rounds up to exactly 2^64, a carry
			// into the high word.
			name: "e rounds up to 2^64", limit: Limit{Burst: 1000, RefillAmount: 2, RefillPeriod: 31},
			tk: 1000 - 1190112520884487201, rf: math.MinInt64, now: math.MaxInt64, need: 1000, wait: 1, ok: true,
		},
		{
			// The clock far behind rf: the wait carries past 2^64 and
			// saturates.
			name: "e past 2^64, clock far behind rf", limit: Limit{Burst: 1000, RefillAmount: 1, RefillPeriod: 2},
			tk: math.MinInt64, rf: math.MaxInt64, now: math.MinInt64, need: 1000, wait: math.MaxInt64, ok: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := State{Limit: tt.limit, Tokens: tt.tk}
			wait, ok := s.RetryAfter(tt.rf, tt.now, tt.need)
			if wait != tt.wait || ok != tt.ok {
				t.Errorf("RetryAfter = (%d, %v), want (%d, %v)", wait, ok, tt.wait, tt.ok)
			}
		})
	}
}

func TestCharge(t *testing.T) {
	s := State{Limit: rpm100, Tokens: 1000, TotalConsumed: 5}
	if got := s.Charge(3000); got.Tokens != -2000 || got.TotalConsumed != 3005 {
		t.Errorf("Charge(3000) = %+v", got)
	}
	if got := s.Charge(-500); got.Tokens != 1500 || got.TotalConsumed != -495 {
		t.Errorf("Charge(-500) = %+v", got)
	}
	low := State{Tokens: math.MinInt64 + 10, TotalConsumed: math.MaxInt64 - 10}
	if got := low.Charge(MaxTokens); got.Tokens != math.MinInt64 || got.TotalConsumed != math.MaxInt64 {
		t.Errorf("saturating charge = %+v", got)
	}
	high := State{Tokens: math.MaxInt64 - 10, TotalConsumed: math.MinInt64 + 10}
	if got := high.Charge(-MaxTokens); got.Tokens != math.MaxInt64 || got.TotalConsumed != math.MinInt64 {
		t.Errorf("saturating refund = %+v", got)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		limit Limit
		want  string // substring of the error; "" for valid
	}{
		{rpm100, ""},
		{maxRate, ""},
		{Limit{Capacity: 1, Burst: 1, RefillAmount: 1, RefillPeriod: MaxRefillPeriod}, ""},
		{Limit{Capacity: 1000, Burst: 5000, RefillAmount: 1000, RefillPeriod: 1000}, ""},
		{Limit{Capacity: 0, Burst: 1, RefillAmount: 1, RefillPeriod: 1}, "Capacity 0 must be positive"},
		{Limit{Capacity: MaxTokens + 1, Burst: MaxTokens + 1, RefillAmount: 1, RefillPeriod: 1}, "Capacity 1000000000000001 exceeds MaxTokens"},
		{Limit{Capacity: 1000, Burst: 500, RefillAmount: 1, RefillPeriod: 1}, "Burst 500 is less than Capacity 1000"},
		{Limit{Capacity: 1000, Burst: MaxTokens + 1, RefillAmount: 1, RefillPeriod: 1}, "Burst 1000000000000001 exceeds MaxTokens"},
		{Limit{Capacity: 1, Burst: 1, RefillAmount: -1, RefillPeriod: 1}, "RefillAmount -1 must be positive"},
		{Limit{Capacity: 1, Burst: 1, RefillAmount: math.MaxInt64, RefillPeriod: 1}, "RefillAmount 9223372036854775807 exceeds MaxTokens"},
		{Limit{Capacity: 1, Burst: 1, RefillAmount: 1, RefillPeriod: 0}, "RefillPeriod 0 ms must be positive"},
		{Limit{Capacity: 1, Burst: 1, RefillAmount: 1, RefillPeriod: MaxRefillPeriod + 1}, "RefillPeriod 31622400001 ms exceeds MaxRefillPeriod"},
	}
	for _, tt := range tests {
		err := tt.limit.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: unexpected error %v", tt.limit, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("%+v: error %v, want one containing %q and wrapping ErrInvalidLimit", tt.limit, err, tt.want)
		}
	}
}

func TestPerShard(t *testing.T) {
	tests := []struct {
		in   Limit
		n    int64
		want Limit
	}{
		// 100000 / 8 = 12500 exactly.
		{rpm100, 8, Limit{12_500, 12_500, 12_500, 60_000}},
		// 100000 / 3 = 33333.33 -> 33333 (3 shards hold 99999 <= 100000).
		{rpm100, 3, Limit{33_333, 33_333, 33_333, 60_000}},
		{rpm100, 1, rpm100},
		{rpm100, 0, rpm100},
		{rpm100, -4, rpm100},
		// 1 token over 2048 shards: 1000/2048 = 0.49 -> 0, not clamped.
		{Limit{1000, 1000, 1000, 1000}, 2048, Limit{0, 0, 0, 1000}},
		// Burst >= Capacity is preserved: 5000/4 = 1250 >= 3000/4 = 750.
		{Limit{3000, 5000, 1000, 1000}, 4, Limit{750, 1250, 250, 1000}},
	}
	for _, tt := range tests {
		if got := tt.in.PerShard(tt.n); got != tt.want {
			t.Errorf("%+v.PerShard(%d) = %+v, want %+v", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestFloorDiv(t *testing.T) {
	tests := []struct{ a, b, want int64 }{
		{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 5, 0}, {-1, 1000, -1},
		{math.MinInt64, 2, math.MinInt64 / 2}, {math.MinInt64 + 1, 2, math.MinInt64 / 2},
		{7, -2, -4}, {-7, -2, 3},
	}
	for _, tt := range tests {
		if got := floorDiv(tt.a, tt.b); got != tt.want {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// The refill saturates, rather than overflowing the 128-bit division,
// when elapsed * RefillAmount reaches RefillPeriod * 2^64: an item idle
// since the smallest timestamp is full.
func TestRefillSaturatesAtTheDivisionsLimit(t *testing.T) {
	s := State{Limit: Limit{Burst: 5000, RefillAmount: 2, RefillPeriod: 1}}
	if got := s.Effective(math.MinInt64, 0); got != 5000 { // 2^63 ms at 2 a ms: 2^64
		t.Fatalf("Effective = %d, want the burst", got)
	}
}

// RefillTime: exact at a rate of 1 millitoken per period, saturated where
// the product or the quotient leaves the range.
func TestRefillTimeAtItsEdges(t *testing.T) {
	for _, c := range []struct {
		l      Limit
		amount int64
		lo, hi int64
	}{
		{Limit{RefillAmount: 1, RefillPeriod: 1000}, 5, 5000, 5000},
		{Limit{RefillAmount: 1, RefillPeriod: 1 << 24}, 1 << 40, MaxRefillTime, MaxRefillTime},       // product 2^64
		{Limit{RefillAmount: 2, RefillPeriod: 2147483649}, 2147483647, MaxRefillTime, MaxRefillTime}, // quotient MaxRefillTime, remainder 1
	} {
		if lo, hi := c.l.RefillTime(c.amount); lo != c.lo || hi != c.hi {
			t.Errorf("RefillTime(%d) of %+v = %d, %d; want %d, %d", c.amount, c.l, lo, hi, c.lo, c.hi)
		}
	}
}

// Charge saturates where the refund of the smallest int64 would wrap.
func TestChargeSaturatesBothWays(t *testing.T) {
	s := State{}.Charge(math.MinInt64)
	if s.Tokens != math.MaxInt64 || s.TotalConsumed != math.MinInt64 {
		t.Fatalf("refund of MinInt64 from 0: tokens %d, consumed %d", s.Tokens, s.TotalConsumed)
	}
}
