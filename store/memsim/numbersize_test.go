package memsim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// slowNumberSize is the rule NumberSize implements, spelled out: base-100
// digits counted one division at a time (what NumberSize did before it
// counted decimal digits by bit length).
func slowNumberSize(n int64) int {
	if n == 0 {
		return 1
	}
	size := 1
	u := uint64(n)
	if n < 0 {
		u = -u
		size++
	}
	for u%100 == 0 {
		u /= 100
	}
	for u > 0 {
		size++
		u /= 100
	}
	return size
}

// NumberSize agrees with the rule at every power of ten, its neighbours,
// the extremes and a million random numbers of every magnitude.
func TestNumberSizeAgainstDigitPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []int64{0, 1, -1, 9, 10, 99, 100, 101, 999, 1000, 1e18, -1e18, math.MaxInt64, math.MinInt64, 9999999999999999, 1e19 / 10 * 9}
	for i := 0; i < 19; i++ {
		p := int64(1)
		for j := 0; j < i; j++ {
			p *= 10
		}
		cases = append(cases, p, p-1, p+1, -p, -p+1)
	}
	for i := 0; i < 1_000_000; i++ {
		cases = append(cases, int64(r.Uint64())>>r.IntN(64))
	}
	for _, c := range cases {
		if a, b := NumberSize(c), slowNumberSize(c); a != b {
			t.Fatalf("NumberSize(%d) = %d, want %d", c, a, b)
		}
	}
}
