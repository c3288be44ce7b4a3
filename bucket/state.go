package bucket

import (
	"math"
	"math/bits"
)

// A State is one limit's bucket as stored: its Limit and two counters. The
// stored balance does not include the refill since the item's refill
// timestamp rf; every method that depends on time takes rf and now, both in
// Unix milliseconds, and computes that refill lazily.
//
// The methods trust only the Limit fields to be in bounds (see [Limit]).
// Tokens, rf and now may be any int64: a bucket may have been idle for
// decades, a clock may lag behind rf, and Adjust may have driven Tokens deep
// into debt. No method overflows or panics on any such input.
type State struct {
	// Limit is the bucket's shape: burst, capacity and refill rate.
	Limit
	// Tokens is the stored balance tk in millitokens, excluding the refill
	// since rf. It may be negative (debt from charges after the fact) and
	// may exceed Burst (when Burst was lowered).
	Tokens int64
	// TotalConsumed is the monotone usage counter tc in millitokens: every
	// charge adds to it, every refund subtracts from it.
	TotalConsumed int64
}

// Effective returns the balance, in millitokens, that the bucket holds at
// now given the refill timestamp rf:
//
//	min(Tokens + floor(elapsed * RefillAmount / RefillPeriod), Burst)
//	elapsed = max(0, now - rf)
//
// A clock behind rf sees no refill, never a negative one. Refill never raises
// the balance above Burst, and a balance already above Burst (Burst was
// lowered) reads as Burst. The result may be negative (debt).
//
// The product elapsed * RefillAmount is computed in 128 bits, so any idle
// time at any rate within bounds is exact.
func (s State) Effective(rf, now int64) int64 {
	tk, bx := s.Tokens, s.Burst
	if tk >= bx {
		return bx
	}
	gap := uint64(bx) - uint64(tk) // bx - tk > 0; exact even when it exceeds MaxInt64
	r := refill(elapsed(rf, now), s.RefillAmount, s.RefillPeriod)
	if r >= gap {
		return bx
	}
	return int64(uint64(tk) + r) // tk < tk + r < bx: in range
}

// RefillDelta returns Effective(rf, now) - Tokens: the amount a write must
// add to the stored Tokens to materialize the refill up to now (the write
// then sets rf to max(rf, now): rf never moves backwards). It is negative when Tokens exceeds Burst, because
// the refill caps the balance at Burst.
//
// The true delta exceeds MaxInt64 only when Tokens is below
// Burst - MaxInt64, a debt no realistic sequence of charges reaches; the
// delta then saturates at MaxInt64, which credits less than the full refill
// (the safe direction) instead of wrapping around.
func (s State) RefillDelta(rf, now int64) int64 {
	e := s.Effective(rf, now)
	if e < s.Tokens {
		return e - s.Tokens // Burst - Tokens, in [Burst-MaxInt64, -1]
	}
	d := uint64(e) - uint64(s.Tokens)
	if d > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(d)
}

// Refilled returns s with the refill up to now materialized:
// Tokens = s.Effective(rf, now). It is the state a write that adds
// [State.RefillDelta] and sets rf to max(rf, now) leaves behind (up to the
// saturation described there).
func (s State) Refilled(rf, now int64) State {
	s.Tokens = s.Effective(rf, now)
	return s
}

// Allows reports whether need millitokens can be taken at now, that is
// whether Effective(rf, now) >= need.
func (s State) Allows(rf, now, need int64) bool {
	return s.Effective(rf, now) >= need
}

// Charge returns s after amount millitokens were charged unconditionally:
// Tokens decreases and TotalConsumed increases by amount. A negative amount
// is a refund. Unlike an acquire, a charge may drive Tokens negative; it is
// what an Adjust applies. Both counters saturate at the int64 limits instead
// of wrapping around (with |amount| <= MaxTokens that takes more than 9,000
// maximal charges without any refill in between).
func (s State) Charge(amount int64) State {
	s.Tokens = subSat(s.Tokens, amount)
	s.TotalConsumed = AddSat(s.TotalConsumed, amount)
	return s
}

// RetryAfter returns the smallest wait w >= 0, in milliseconds, such that
// Effective(rf, now+w) >= need: how long a caller must wait before need
// millitokens are available, if nothing else is charged meanwhile. The
// refill is counted from rf, not from now, so the earliest moment is
//
//	rf + ceil((need - Tokens) * RefillPeriod / RefillAmount)
//
// and never earlier than now. The wait is 0 when need is available already.
//
// ok is false, and wait is math.MaxInt64, when no wait suffices: need
// exceeds Burst, or the bucket cannot refill (RefillAmount 0, as a
// [Limit.PerShard] limit may have) and lacks need now. A wait too long for
// an int64 (only for debts beyond any realistic size) saturates at
// math.MaxInt64 with ok true.
func (s State) RetryAfter(rf, now, need int64) (wait int64, ok bool) {
	if need > s.Burst {
		return math.MaxInt64, false
	}
	if s.Effective(rf, now) >= need {
		return 0, true
	}
	// Here Effective(rf, now) < need <= Burst, so the balance is not capped:
	// Tokens + refill(now) < need, and in particular Tokens < need.
	ra, rp := s.RefillAmount, s.RefillPeriod
	if ra <= 0 || rp <= 0 {
		return math.MaxInt64, false
	}
	d := uint64(need) - uint64(s.Tokens) // need - Tokens > 0; exact
	// The smallest elapsed time e with floor(e*ra/rp) >= d, that is
	// e*ra >= d*rp, is e = ceil(d*rp/ra). Both e and the wait are formed
	// in 128 bits: e may pass 2^64 while rf + e - now still fits.
	hi, lo := bits.Mul64(d, uint64(rp))
	eHi, r := bits.Div64(0, hi, uint64(ra))
	eLo, rem := bits.Div64(r, lo, uint64(ra))
	if rem != 0 {
		var c uint64
		eLo, c = bits.Add64(eLo, 1, 0)
		eHi += c
	}
	// The wait is rf + e - now, which is positive: either now < rf, or
	// now - rf < e because the refill at now falls short.
	var wHi, wLo uint64
	if now >= rf {
		var b uint64
		wLo, b = bits.Sub64(eLo, uint64(now)-uint64(rf), 0)
		wHi = eHi - b
	} else {
		var c uint64
		wLo, c = bits.Add64(eLo, uint64(rf)-uint64(now), 0)
		wHi = eHi + c
	}
	if wHi != 0 || wLo > math.MaxInt64 {
		return math.MaxInt64, true
	}
	return int64(wLo), true
}

// elapsed returns max(0, now-rf) as a uint64, exact for all int64 inputs.
func elapsed(rf, now int64) uint64 {
	if now <= rf {
		return 0
	}
	return uint64(now) - uint64(rf)
}

// refill returns floor(e*ra/rp), saturated at math.MaxUint64, or 0 when ra
// or rp is not positive. The product is formed in 128 bits.
func refill(e uint64, ra, rp int64) uint64 {
	if e == 0 || ra <= 0 || rp <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(e, uint64(ra))
	if hi >= uint64(rp) {
		return math.MaxUint64 // the quotient needs more than 64 bits
	}
	q, _ := bits.Div64(hi, lo, uint64(rp))
	return q
}

// AddSat returns a+b, saturated at math.MinInt64 and math.MaxInt64
// instead of wrapping.
func AddSat(a, b int64) int64 {
	c := a + b
	if (c^a)&(c^b) < 0 { // a and b share a sign that c lacks
		if a < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return c
}

// subSat returns a-b, saturated at the int64 limits.
func subSat(a, b int64) int64 {
	c := a - b
	if (a^b)&(a^c) < 0 { // a and b differ in sign and c differs from a
		if a < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return c
}

// FullAt returns the first instant (Unix ms) at which the bucket, holding
// Tokens at rf and charged nothing more, is full:
// rf + ceil((Burst - Tokens) * RefillPeriod / RefillAmount), or rf when it is
// full already. The wait saturates at MaxRefillTime.
func (s State) FullAt(rf int64) int64 {
	w, ok := s.RetryAfter(rf, rf, s.Burst)
	if !ok || w > MaxRefillTime {
		w = MaxRefillTime
	}
	return AddSat(rf, w)
}
