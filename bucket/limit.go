package bucket

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Units and bounds.
//
// The bounds are chosen so that no arithmetic in this package can overflow
// for any Limit within them, whatever the (untrusted) token balance and
// timestamps: products of a duration and a rate are computed with 128-bit
// intermediates, sums that may leave the int64 range are computed unsigned or
// saturated, and a Limit field is never multiplied by anything but a 64-bit
// value. The bounds therefore mostly leave headroom for callers, who add up
// per-limit and per-shard amounts with plain int64 arithmetic.
const (
	// MilliPerToken is the number of millitokens in one token. Every token
	// amount in this package is in millitokens.
	MilliPerToken int64 = 1000

	// MaxTokens bounds Capacity, Burst and RefillAmount, and any single
	// amount a caller charges or refunds: 1e15 millitokens (1e12 tokens).
	// It is below 2^53, so every bounded value is exact as a float64 (JSON,
	// JavaScript, the DynamoDB console), and 9,000 of them still add up
	// without overflowing an int64.
	MaxTokens int64 = 1_000_000_000_000_000

	// MaxRefillPeriod bounds RefillPeriod: 366 days in milliseconds,
	// enough for a yearly limit in a leap year.
	MaxRefillPeriod int64 = 366 * 24 * 60 * 60 * 1000
)

// ErrInvalidLimit is wrapped by every error [Limit.Validate] returns.
var ErrInvalidLimit = errors.New("bucket: invalid limit")

// A Limit describes one token bucket: it holds up to Burst millitokens and
// gains RefillAmount millitokens every RefillPeriod milliseconds, credited
// continuously (rounded down to whole millitokens, see [State.Effective]).
//
// The zero Limit is not valid; see [Limit.Validate] for the rules. The math
// methods of [State] accept any Limit with RefillPeriod >= 1 and the other
// fields in [0, MaxTokens], which includes the per-shard limits that
// [Limit.PerShard] derives; outside that domain they never panic but their
// results are unspecified.
type Limit struct {
	// Capacity is the nominal size of the bucket in millitokens (in the
	// composite-item design, the balance a new bucket starts with). The
	// refill math does not use it.
	Capacity int64
	// Burst is the ceiling, in millitokens, that refill never raises the
	// balance above. It is usually equal to Capacity, and never below it.
	Burst int64
	// RefillAmount is the number of millitokens credited per RefillPeriod.
	RefillAmount int64
	// RefillPeriod is the refill period in milliseconds.
	RefillPeriod int64
}

// Validate reports whether l is a valid stored limit:
//
//   - 1 <= Capacity <= MaxTokens,
//   - Capacity <= Burst <= MaxTokens (a ceiling below the nominal size would
//     silently cap the bucket at Burst),
//   - 1 <= RefillAmount <= MaxTokens,
//   - 1 <= RefillPeriod <= MaxRefillPeriod.
//
// The error wraps [ErrInvalidLimit] and names the first field, in that
// order, that breaks a rule, e.g.
// "bucket: invalid limit: Burst 500 is less than Capacity 1000".
func (l Limit) Validate() error {
	if l.Capacity < 1 {
		return fmt.Errorf("%w: Capacity %d must be positive", ErrInvalidLimit, l.Capacity)
	}
	if l.Capacity > MaxTokens {
		return fmt.Errorf("%w: Capacity %d exceeds MaxTokens (%d)", ErrInvalidLimit, l.Capacity, MaxTokens)
	}
	if l.Burst < l.Capacity {
		return fmt.Errorf("%w: Burst %d is less than Capacity %d", ErrInvalidLimit, l.Burst, l.Capacity)
	}
	if l.Burst > MaxTokens {
		return fmt.Errorf("%w: Burst %d exceeds MaxTokens (%d)", ErrInvalidLimit, l.Burst, MaxTokens)
	}
	if l.RefillAmount < 1 {
		return fmt.Errorf("%w: RefillAmount %d must be positive", ErrInvalidLimit, l.RefillAmount)
	}
	if l.RefillAmount > MaxTokens {
		return fmt.Errorf("%w: RefillAmount %d exceeds MaxTokens (%d)", ErrInvalidLimit, l.RefillAmount, MaxTokens)
	}
	if l.RefillPeriod < 1 {
		return fmt.Errorf("%w: RefillPeriod %d ms must be positive", ErrInvalidLimit, l.RefillPeriod)
	}
	if l.RefillPeriod > MaxRefillPeriod {
		return fmt.Errorf("%w: RefillPeriod %d ms exceeds MaxRefillPeriod (%d ms)", ErrInvalidLimit, l.RefillPeriod, MaxRefillPeriod)
	}
	return nil
}

// PerShard returns the limit each of n shards enforces so that the n shards
// together never admit more than l: Capacity, Burst and RefillAmount are each
// divided by n, rounding down; RefillPeriod is unchanged. An n below 1 is
// treated as 1 (l is returned unchanged).
//
// Rounding down means the shards together hold at most Burst and refill at
// most RefillAmount per RefillPeriod, so adding shards can never raise the
// admission bound; the rate lost to rounding is less than n millitokens per
// RefillPeriod in total.
//
// A field smaller than n becomes 0, and the result is deliberately not
// clamped to 1 millitoken: n shards of 1 millitoken would together admit up
// to n-1 millitokens more than l allows. A shard whose Burst is 0 admits no
// positive amount, and one whose RefillAmount is 0 never refills; for both,
// [State.RetryAfter] reports ok == false for an amount the shard cannot
// cover. More generally, a request for more than l.PerShard(n).Burst can never
// be served by one shard, so a caller must not shard a limit beyond what
// its largest request needs. The result of PerShard is meant for the math
// methods of [State]; it need not pass [Limit.Validate].
func (l Limit) PerShard(n int64) Limit {
	if n <= 1 {
		return l
	}
	return Limit{
		Capacity:     floorDiv(l.Capacity, n),
		Burst:        floorDiv(l.Burst, n),
		RefillAmount: floorDiv(l.RefillAmount, n),
		RefillPeriod: l.RefillPeriod,
	}
}

// floorDiv returns floor(a/b) for b > 0. Go's / truncates toward zero,
// which rounds a negative quotient up; floorDiv rounds it down.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// MaxRefillTime caps the durations RefillTime and FullAt compute, in ms:
// a quarter of the int64 range, so that a caller can still add such a
// duration to a timestamp, and add several of them together, without
// overflowing. Only absurd debts or zero refill reach it.
const MaxRefillTime int64 = math.MaxInt64 / 4

// RefillTime returns how long, in ms, the refill takes to produce amount
// millitokens: lo = floor(amount * RefillPeriod / RefillAmount) and hi the
// ceiling. Both are 0 for amount <= 0; they saturate at MaxRefillTime (also
// when RefillAmount < 1, as a PerShard limit may have). The product is
// formed in 128 bits.
func (l Limit) RefillTime(amount int64) (lo, hi int64) {
	if amount <= 0 {
		return 0, 0
	}
	if l.RefillAmount < 1 {
		return MaxRefillTime, MaxRefillTime
	}
	h, lw := bits.Mul64(uint64(amount), uint64(l.RefillPeriod))
	if h >= uint64(l.RefillAmount) {
		return MaxRefillTime, MaxRefillTime
	}
	q, r := bits.Div64(h, lw, uint64(l.RefillAmount))
	if q >= uint64(MaxRefillTime) {
		return MaxRefillTime, MaxRefillTime
	}
	lo, hi = int64(q), int64(q)
	if r != 0 {
		hi++
	}
	return lo, hi
}

// WholeTokens returns millitokens in whole tokens, rounded down (towards
// negative infinity for a debt).
func WholeTokens(milli int64) int64 { return floorDiv(milli, MilliPerToken) }
