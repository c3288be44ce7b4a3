package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// windowStart finds its sample from the newest back; the plain scan of
// every sample (the latest at least rateWindow old, else the oldest) is
// the reference, over random sample times kept as sampleConsumption keeps
// them, and query times before, among and after them.
func TestWindowStartMatchesAScanOfEverySample(t *testing.T) {
	ref := func(is *istate, at int64) int {
		best, oldest := -1, -1
		for i, s := range is.cons {
			if s.at == 0 {
				continue
			}
			if oldest < 0 || s.at < is.cons[oldest].at {
				oldest = i
			}
			if at-s.at >= rateWindow && (best < 0 || s.at > is.cons[best].at) {
				best = i
			}
		}
		if best < 0 {
			return oldest
		}
		return best
	}
	r := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 200; run++ {
		var is istate
		at, units := int64(r.IntN(2))*int64(r.IntN(1e9)), 0.0 // the first sample at 0 (an empty slot's mark) now and then
		for n := r.IntN(80); n > 0; n-- {
			last := &is.cons[(is.consNext+len(is.cons)-1)%len(is.cons)]
			if last.at == 0 || at-last.at >= rateSampleGap {
				is.cons[is.consNext] = consSample{at: at, units: units}
				is.consNext = (is.consNext + 1) % len(is.cons)
			}
			at += int64(r.IntN(int(3 * rateSampleGap)))
			units += float64(r.IntN(100))
			q := at - int64(r.IntN(int(2*rateWindow)))
			if got, want := is.windowStart(q), ref(&is, q); got != want {
				t.Fatalf("run %d: window at %d starts at sample %d, the scan says %d (samples %v)", run, q, got, want, is.cons)
			}
		}
	}
}

// errCode classes an answer the same whether it comes bare (the fast path
// by type) or wrapped (the errors.Is chain).
func TestErrCodeBareAndWrapped(t *testing.T) {
	for _, c := range []struct {
		err  error
		want errClass
	}{
		{&store.ConditionFailedError{}, codeCondition},
		{&store.ThrottledError{}, codeThrottled},
		{&store.UnavailableError{Err: context.DeadlineExceeded}, codeUnavailable},
		{&store.ValidationError{Message: "x"}, codeValidation},
		{errors.New("other"), codeOther},
	} {
		if got := errCode(c.err); got != c.want {
			t.Errorf("errCode(%T) = %d, want %d", c.err, got, c.want)
		}
		if got := errCode(fmt.Errorf("wrapped: %w", c.err)); got != c.want {
			t.Errorf("errCode(wrapped %T) = %d, want %d", c.err, got, c.want)
		}
	}
	if errCode(nil) != codeOK {
		t.Error("errCode(nil) is not codeOK")
	}
}
