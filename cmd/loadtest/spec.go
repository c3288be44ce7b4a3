package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shardlimit/limiter"
)

// parseLimits reads the -limits syntax: comma-separated limits as
// limiter.ParseLimit reads them (name:rate/period[:burst], or a calendar
// quota name:n/window[:anchor][@zone]), such as "rps:100000/s",
// "rpm:200/s,tpm:10000/min:20000" or "rps:1000/s,usd:100000000/month@Europe/Paris".
func parseLimits(flagName, s string) ([]limiter.Limit, error) {
	var out []limiter.Limit
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		l, err := limiter.ParseLimit(part)
		if err != nil {
			return nil, fmt.Errorf("-%s: %v", flagName, err)
		}
		if slices.ContainsFunc(out, func(x limiter.Limit) bool { return x.Name == l.Name }) {
			return nil, fmt.Errorf("-%s: limit %q given twice", flagName, l.Name)
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		_, err := limiter.ParseLimit("")
		return nil, fmt.Errorf("-%s: no limit given: %w", flagName, err)
	}
	return out, nil
}

// parseConsume reads -consume: "" for 1 token of every limit, a number N
// for N of every limit, or name:N pairs (comma-separated) for those limits
// only.
func parseConsume(s string, limits []limiter.Limit) (map[string]int64, error) {
	s = strings.TrimSpace(s)
	out := make(map[string]int64, len(limits))
	if s == "" || !strings.Contains(s, ":") {
		n := int64(1)
		if s != "" {
			var err error
			if n, err = strconv.ParseInt(s, 10, 64); err != nil || n < 1 {
				return nil, fmt.Errorf("-consume %q: want a whole number of at least 1, or name:N pairs", s)
			}
		}
		for _, l := range limits {
			out[l.Name] = n
		}
		return out, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(part), ":")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < 1 {
			return nil, fmt.Errorf("-consume %q: want name:N with N a whole number of at least 1", part)
		}
		if !slices.ContainsFunc(limits, func(l limiter.Limit) bool { return l.Name == name }) {
			return nil, fmt.Errorf("-consume: %q is not one of the -limits", name)
		}
		out[name] = n
	}
	return out, nil
}

// formatLimits prints limits in the -limits syntax.
func formatLimits(ls []limiter.Limit) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}

// perSecond is a limit's refill rate in tokens per second; 0 for a
// calendar quota, which does not refill within its window.
func perSecond(l limiter.Limit) float64 {
	if l.Period <= 0 {
		return 0
	}
	return float64(l.Refill) / l.Period.Seconds()
}
