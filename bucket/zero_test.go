package bucket

import (
	"maps"
	"math"
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"
	"time"
)

// Every exported function and method of the package with zero, negative,
// huge and nil input: no panic (a Limit outside Validate's rules gives
// unspecified results, a Calendar that is not Valid too, but neither
// panics), and the errors name what is wrong.
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	var nilDE *DecodeError
	var nilComposite *Composite
	odd := []int64{0, -1, 1, math.MinInt64, math.MaxInt64, MaxTokens, -MaxTokens}
	limits := []Limit{{}, {RefillPeriod: -1}, {Capacity: math.MaxInt64, Burst: math.MinInt64, RefillAmount: math.MaxInt64, RefillPeriod: math.MaxInt64}, rpm100}
	cals := []Calendar{{}, {Window: 255}, {Window: Day, MonthDay: -1}, {Window: Month, MonthDay: 99}, {Window: Week, WeekStart: 99},
		{Window: Month, Loc: time.FixedZone("x", math.MaxInt32)}}
	calls := map[string]func(){
		"AddSat":                 func() { AddSat(math.MaxInt64, math.MaxInt64); AddSat(math.MinInt64, math.MinInt64) },
		"AttrName empty":         func() { AttrName("", ""); QuotaAttrName("", "") },
		"ParseAttrName":          func() { ParseAttrName(""); ParseAttrName("b_"); ParseAttrName("b__"); ParseAttrName("q_") },
		"WholeTokens":            func() { WholeTokens(math.MinInt64); WholeTokens(math.MaxInt64) },
		"Window.String":          func() { _ = Window(0).String(); _ = Window(255).String() },
		"nil DecodeError.Error":  func() { _ = nilDE.Error() },
		"zero DecodeError.Error": func() { _ = (&DecodeError{}).Error() },
		"Decode nil":             func() { _, _ = Decode(nil) },
		"Decode nonsense": func() {
			_, _ = Decode(maps.All(map[string]int64{"": 1, "b_": math.MinInt64, "b_x_rp": 0, "b_x_ra": -1, "q_x_ws": math.MaxInt64}))
		},
		"zero Composite": func() {
			var c Composite
			c.Get("")
			for range c.Attrs() {
			}
			c.Set("", State{})
			c.Set("x", State{})
			for range c.Attrs() {
			}
		},
		"nil Composite.Set": func() { nilComposite.Set("x", State{}) },
		"Calendar": func() {
			for _, c := range cals {
				c.Valid()
				for _, now := range odd {
					c.Bounds(now)
				}
			}
		},
		"Limit and State": func() {
			for _, l := range limits {
				_ = l.Validate()
				for _, n := range odd {
					l.PerShard(n)
					l.RefillTime(n)
					for _, tk := range odd {
						s := State{Limit: l, Tokens: tk, TotalConsumed: n}
						s.Charge(n)
						s.FullAt(n)
						for _, now := range odd {
							s.Allows(n, now, tk)
							s.Effective(n, now)
							s.RefillDelta(n, now)
							s.Refilled(n, now)
							s.RetryAfter(n, now, tk)
						}
					}
				}
			}
		},
	}
	zerotest.NoPanics(t, calls)
	if err := (Limit{}).Validate(); err == nil {
		t.Error("the zero Limit is valid")
	}
}
