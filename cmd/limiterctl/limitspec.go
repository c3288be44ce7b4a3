package main

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter"
)

// The limit syntax: name:rate[/period][:burst].
//
//	rpm:100/min:150    100 a minute, up to 150 at once
//	tpm:10000/min      burst = rate
//	rps:10/s
//	daily:5000/day
//	batch:30/90s       any Go duration as the period
//	rph:100            the period defaults to a minute
//
// Periods: s, sec, second, m, min, minute, h, hour, d, day (optionally
// with a count: 10s, 5min, 2day), or a Go duration (90s, 1h30m). The rate
// is both the capacity and the refill per period.

const limitSyntax = "name:rate[/period][:burst], e.g. rpm:100/min:150"

var periodUnits = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "second": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hour": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour,
}

// parseLimit parses one limit in the limit syntax; its errors name the
// part that is wrong.
func parseLimit(spec string) (limiter.Limit, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("limit %q: %s (want %s)", spec, fmt.Sprintf(format, a...), limitSyntax)
	}
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return limiter.Limit{}, bad("%d part(s) separated by ':', want 2 or 3", len(parts))
	}
	name, rateSpec := parts[0], parts[1]
	if name == "" {
		return limiter.Limit{}, bad("the name is empty")
	}
	rateStr, periodStr, hasPeriod := strings.Cut(rateSpec, "/")
	rate, err := wholeTokens(rateStr)
	if err != nil {
		return limiter.Limit{}, bad("rate %q %v", rateStr, err)
	}
	period := time.Minute
	if hasPeriod {
		if period, err = parsePeriod(periodStr); err != nil {
			return limiter.Limit{}, bad("period %q %v", periodStr, err)
		}
	}
	l := limiter.Limit{Name: name, Capacity: rate, Burst: rate, Refill: rate, Period: period}
	if len(parts) == 3 {
		if l.Burst, err = wholeTokens(parts[2]); err != nil {
			return limiter.Limit{}, bad("burst %q %v", parts[2], err)
		}
		if l.Burst < rate {
			return limiter.Limit{}, bad("burst %d is below the rate %d; a bucket holds at least one period's tokens", l.Burst, rate)
		}
	}
	if err := l.Validate(); err != nil {
		var ve *limiter.ValidationError
		if errors.As(err, &ve) {
			return limiter.Limit{}, bad("%s %s", ve.Field, ve.Rule)
		}
		return limiter.Limit{}, bad("%v", err)
	}
	return l, nil
}

func wholeTokens(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("is missing")
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil || n < 1 {
		return 0, errors.New("must be a whole number of tokens, at least 1")
	}
	if n > limiter.MaxTokens {
		return 0, fmt.Errorf("must be at most %d tokens", int64(limiter.MaxTokens))
	}
	return n, nil
}

// parsePeriod reads a unit (min), a count and a unit (5min) or a Go
// duration (90s).
func parsePeriod(s string) (time.Duration, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if unit, ok := periodUnits[s[i:]]; ok {
		n := int64(1)
		if i > 0 {
			var err error
			if n, err = strconv.ParseInt(s[:i], 10, 64); err != nil || n < 1 || n > int64(367*24*time.Hour/unit) {
				return 0, errors.New("has a count out of range")
			}
		}
		return time.Duration(n) * unit, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("must be one of s, sec, m, min, h, hour, d, day (optionally with a count, as in 5min) or a Go duration such as 90s or 1h30m")
	}
	return d, nil
}

// parseLimits parses a list of limits; names must be distinct.
func parseLimits(specs []string) ([]limiter.Limit, error) {
	var ls []limiter.Limit
	seen := map[string]bool{}
	for _, s := range specs {
		l, err := parseLimit(s)
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

// formatLimit writes l in the limit syntax, or returns false when the
// syntax cannot express it (capacity and refill differ).
func formatLimit(l limiter.Limit) (string, bool) {
	if l.Capacity != l.Refill {
		return "", false
	}
	s := l.Name + ":" + strconv.FormatInt(l.Refill, 10) + "/" + formatPeriod(l.Period)
	if b := burstOf(l); b != l.Capacity {
		s += ":" + strconv.FormatInt(b, 10)
	}
	return s, true
}

// describeLimit is formatLimit, or every field for a limit the syntax
// cannot express.
func describeLimit(l limiter.Limit) string {
	if s, ok := formatLimit(l); ok {
		return s
	}
	return fmt.Sprintf("%s(capacity %d, burst %d, refill %d per %s)", l.Name, l.Capacity, burstOf(l), l.Refill, formatPeriod(l.Period))
}

func describeLimits(ls []limiter.Limit) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = describeLimit(l)
	}
	return strings.Join(parts, ", ")
}

func burstOf(l limiter.Limit) int64 {
	if l.Burst == 0 {
		return l.Capacity
	}
	return l.Burst
}

// formatPeriod names a period by its unit when it is one (s, min, h, day),
// else as a short Go duration (10s, 5m, 36h).
func formatPeriod(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}} {
		if d == u.d {
			return u.name
		}
	}
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// sameLimits reports whether two limit lists are the same limits, in any
// order.
func sameLimits(a, b []limiter.Limit) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = sortedLimits(a), sortedLimits(b)
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Capacity != y.Capacity || burstOf(x) != burstOf(y) || x.Refill != y.Refill || x.Period != y.Period {
			return false
		}
	}
	return true
}

func sortedLimits(ls []limiter.Limit) []limiter.Limit {
	out := append([]limiter.Limit(nil), ls...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
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
}

func toJSON(l limiter.Limit) limitJSON {
	s, _ := formatLimit(l)
	return limitJSON{Name: l.Name, Spec: s, Capacity: l.Capacity, Burst: burstOf(l), Refill: l.Refill,
		Period: formatPeriod(l.Period), PeriodMs: l.Period.Milliseconds()}
}

func limitsJSON(ls []limiter.Limit) []limitJSON {
	out := make([]limitJSON, len(ls))
	for i, l := range ls {
		out[i] = toJSON(l)
	}
	return out
}
