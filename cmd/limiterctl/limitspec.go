package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shardlimit/limiter"
)

// Limits are written as limiter.ParseLimit reads them and Limit.String
// writes them: name:rate/period[:burst], such as rpm:100/min:150.

// parseLimits parses a list of limits; names must be distinct.
func parseLimits(specs []string) ([]limiter.Limit, error) {
	var ls []limiter.Limit
	seen := map[string]bool{}
	for _, s := range specs {
		l, err := limiter.ParseLimit(s)
		if err != nil {
			return nil, err
		}
		if seen[l.Name] {
			return nil, fmt.Errorf("limit %q: the name %q appears twice", s, l.Name)
		}
		seen[l.Name] = true
		ls = append(ls, l)
	}
	return ls, nil
}

// hasSpec reports whether the limit syntax can express l: whether its
// capacity is its refill, or it is a calendar quota.
func hasSpec(l limiter.Limit) bool { return l.Capacity == l.Refill || l.Window != "" }

func describeLimits(ls []limiter.Limit) string {
	return strings.Join(mapped(ls, limiter.Limit.String), ", ")
}

// formatPeriod writes a period as the limit syntax does (min, 90s, 7day).
func formatPeriod(d time.Duration) string {
	l := limiter.PerSecond("p", 1)
	l.Period = d
	_, p, _ := strings.Cut(l.String(), "/")
	return p
}

// parsePeriod reads a period as the limit syntax does; the error says what
// it must be.
func parsePeriod(s string) (time.Duration, error) {
	l, err := limiter.ParseLimit("p:1/" + s)
	var ve *limiter.ValidationError
	if errors.As(err, &ve) {
		return 0, errors.New(ve.Rule)
	}
	return l.Period, err
}

// sameLimits reports whether two limit lists are the same limits, in any
// order (a burst left 0 is the burst it defaults to).
func sameLimits(a, b []limiter.Limit) bool {
	return slices.EqualFunc(sortedLimits(a), sortedLimits(b), func(x, y limiter.Limit) bool {
		x.Burst, y.Burst = x.EffectiveBurst(), y.EffectiveBurst()
		return x == y
	})
}

func sortedLimits(ls []limiter.Limit) []limiter.Limit {
	return slices.SortedFunc(slices.Values(ls), func(x, y limiter.Limit) int { return strings.Compare(x.Name, y.Name) })
}

// limitJSON is a limit in -o json output and in manifests' mapping form.
type limitJSON struct {
	Name     string `json:"name" yaml:"name"`
	Spec     string `json:"spec,omitempty" yaml:"-"`
	Capacity int64  `json:"capacity" yaml:"capacity"`
	Burst    int64  `json:"burst" yaml:"burst"`
	Refill   int64  `json:"refill" yaml:"refill"`
	Period   string `json:"period" yaml:"period"`
	PeriodMs int64  `json:"period_ms" yaml:"-"`
	Shadow   bool   `json:"shadow,omitempty" yaml:"shadow,omitempty"`
	// A calendar quota's (limiter.Limit.Window and the fields beside it);
	// in a manifest a quota is written in the limit syntax.
	Window    string `json:"window,omitempty" yaml:"-"`
	TimeZone  string `json:"time_zone,omitempty" yaml:"-"`
	WeekStart int    `json:"week_start,omitempty" yaml:"-"`
	MonthDay  int    `json:"month_day,omitempty" yaml:"-"`
	// A concurrency cap's time to live (limiter.Limit.TTL), as a duration.
	TTL string `json:"ttl,omitempty" yaml:"-"`
}

func toJSON(l limiter.Limit) limitJSON {
	j := limitJSON{Name: l.Name, Capacity: l.Capacity, Burst: l.EffectiveBurst(), Refill: l.Refill,
		Period: formatPeriod(l.Period), PeriodMs: l.Period.Milliseconds(), Shadow: l.Shadow,
		Window: l.Window, TimeZone: l.TimeZone, WeekStart: int(l.WeekStart), MonthDay: l.MonthDay}
	if l.TTL != 0 {
		j.TTL = l.TTL.String()
	}
	if hasSpec(l) {
		j.Spec = l.String()
	}
	return j
}

func limitsJSON(ls []limiter.Limit) []limitJSON { return mapped(ls, toJSON) }
