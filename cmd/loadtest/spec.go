package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter"
)

// parseLimits reads the -limits syntax: comma-separated
// name:rate[/period][:burst], such as "rps:100000/s" or
// "rpm:200/s,tpm:10000/m:20000". rate is the tokens credited per period
// (default a second); period is s, m, h, d or a Go duration ("10s",
// "500ms"); burst is the most tokens the bucket holds and starts with
// (default: rate).
func parseLimits(flagName, s string) ([]limiter.Limit, error) {
	var out []limiter.Limit
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		l, err := parseLimit(part)
		if err != nil {
			return nil, fmt.Errorf("-%s %q: %v (want name:rate[/period][:burst], e.g. rps:100/s)", flagName, part, err)
		}
		if slices.ContainsFunc(out, func(x limiter.Limit) bool { return x.Name == l.Name }) {
			return nil, fmt.Errorf("-%s: limit %q given twice", flagName, l.Name)
		}
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("-%s %q: %v", flagName, part, err)
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-%s: no limit given (want name:rate[/period][:burst], e.g. rps:100/s)", flagName)
	}
	return out, nil
}

func parseLimit(s string) (limiter.Limit, error) {
	fields := strings.Split(s, ":")
	if len(fields) < 2 || len(fields) > 3 {
		return limiter.Limit{}, fmt.Errorf("want 2 or 3 fields separated by ':'")
	}
	name, rateSpec := fields[0], fields[1]
	period := time.Second
	if r, p, ok := strings.Cut(rateSpec, "/"); ok {
		d, err := parsePeriod(p)
		if err != nil {
			return limiter.Limit{}, err
		}
		rateSpec, period = r, d
	}
	rate, err := strconv.ParseInt(rateSpec, 10, 64)
	if err != nil || rate < 1 {
		return limiter.Limit{}, fmt.Errorf("rate %q is not a whole number of tokens of at least 1", rateSpec)
	}
	burst := rate
	if len(fields) == 3 {
		if burst, err = strconv.ParseInt(fields[2], 10, 64); err != nil || burst < 1 {
			return limiter.Limit{}, fmt.Errorf("burst %q is not a whole number of tokens of at least 1", fields[2])
		}
	}
	return limiter.Limit{Name: name, Capacity: burst, Burst: burst, Refill: rate, Period: period}, nil
}

func parsePeriod(p string) (time.Duration, error) {
	switch p {
	case "s", "sec", "second":
		return time.Second, nil
	case "m", "min", "minute":
		return time.Minute, nil
	case "h", "hour":
		return time.Hour, nil
	case "d", "day":
		return 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(p)
	if err != nil || d <= 0 || d%time.Millisecond != 0 {
		return 0, fmt.Errorf("period %q is not s, m, h, d or a positive whole number of milliseconds such as 10s", p)
	}
	return d, nil
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

// formatLimit prints a limit in the -limits syntax.
func formatLimit(l limiter.Limit) string {
	s := l.Name + ":" + strconv.FormatInt(l.Refill, 10) + "/" + formatPeriod(l.Period)
	if b := l.Burst; b != 0 && b != l.Refill {
		s += ":" + strconv.FormatInt(b, 10)
	}
	return s
}

func formatPeriod(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	case 24 * time.Hour:
		return "d"
	}
	return d.String()
}

func formatLimits(ls []limiter.Limit) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = formatLimit(l)
	}
	return strings.Join(parts, ",")
}

// perSecond is a limit's refill rate in tokens per second.
func perSecond(l limiter.Limit) float64 {
	return float64(l.Refill) / l.Period.Seconds()
}
