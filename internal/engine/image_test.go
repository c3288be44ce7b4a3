package engine

import (
	"math"
	"testing"
)

// satAdd saturates at the int64 limits instead of wrapping: a guard
// bound moved by the refill time of a huge debt must not turn into its
// opposite.
func TestSatAddSaturates(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{-5, 3, -2},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 1, 1, math.MaxInt64},
		{math.MaxInt64, 0, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MinInt64 + 1, -1, math.MinInt64},
		{math.MinInt64, 0, math.MinInt64},
		{math.MaxInt64, math.MinInt64, -1},
		{0, math.MinInt64, math.MinInt64},
	} {
		if got := satAdd(c.a, c.b); got != c.want {
			t.Errorf("satAdd(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
