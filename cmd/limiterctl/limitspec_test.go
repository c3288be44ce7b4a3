package main

import (
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

func TestParseLimit(t *testing.T) {
	for spec, want := range map[string]limiter.Limit{
		"rpm:100/min:150":   {Name: "rpm", Capacity: 100, Burst: 150, Refill: 100, Period: time.Minute},
		"tpm:10000/min":     {Name: "tpm", Capacity: 10000, Burst: 10000, Refill: 10000, Period: time.Minute},
		"tpm:10_000/m":      {Name: "tpm", Capacity: 10000, Burst: 10000, Refill: 10000, Period: time.Minute},
		"rps:10/s":          {Name: "rps", Capacity: 10, Burst: 10, Refill: 10, Period: time.Second},
		"rps:10/sec":        {Name: "rps", Capacity: 10, Burst: 10, Refill: 10, Period: time.Second},
		"rph:5/hour":        {Name: "rph", Capacity: 5, Burst: 5, Refill: 5, Period: time.Hour},
		"x:5/h":             {Name: "x", Capacity: 5, Burst: 5, Refill: 5, Period: time.Hour},
		"daily:5000/day":    {Name: "daily", Capacity: 5000, Burst: 5000, Refill: 5000, Period: 24 * time.Hour},
		"daily:5000/d":      {Name: "daily", Capacity: 5000, Burst: 5000, Refill: 5000, Period: 24 * time.Hour},
		"weekly:9/7day":     {Name: "weekly", Capacity: 9, Burst: 9, Refill: 9, Period: 7 * 24 * time.Hour},
		"batch:30/90s":      {Name: "batch", Capacity: 30, Burst: 30, Refill: 30, Period: 90 * time.Second},
		"odd:3/1h30m":       {Name: "odd", Capacity: 3, Burst: 3, Refill: 3, Period: 90 * time.Minute},
		"default:7":         {Name: "default", Capacity: 7, Burst: 7, Refill: 7, Period: time.Minute},
		"gpt-3.5:7:9":       {Name: "gpt-3.5", Capacity: 7, Burst: 9, Refill: 7, Period: time.Minute},
		"a_b:1/250ms":       {Name: "a_b", Capacity: 1, Burst: 1, Refill: 1, Period: 250 * time.Millisecond},
		"five:1/5min":       {Name: "five", Capacity: 1, Burst: 1, Refill: 1, Period: 5 * time.Minute},
		"big:1000000000000": {Name: "big", Capacity: 1e12, Burst: 1e12, Refill: 1e12, Period: time.Minute},
	} {
		got, err := parseLimit(spec)
		if err != nil || got != want {
			t.Errorf("parseLimit(%q) = %+v, %v; want %+v", spec, got, err, want)
		}
	}
}

// Parse errors name the part that is wrong.
func TestParseLimitErrors(t *testing.T) {
	for spec, want := range map[string]string{
		"rpm":                 "1 part(s)",
		"rpm:1:2:3":           "4 part(s)",
		":100/min":            "the name is empty",
		"rpm:abc/min":         `rate "abc" must be a whole number`,
		"rpm:0/min":           `rate "0" must be a whole number of tokens, at least 1`,
		"rpm:/min":            `rate "" is missing`,
		"rpm:100/fortnight":   `period "fortnight" must be one of s, sec, m, min`,
		"rpm:100/":            `period "" must be one of`,
		"rpm:100/0min":        `period "0min" has a count out of range`,
		"rpm:100/min:50":      "burst 50 is below the rate 100",
		"rpm:100/min:x":       `burst "x" must be a whole number`,
		"9rpm:100/min":        "Limit.Name",
		"wcu:100/min":         "reserved",
		"rpm:100/367day":      "Period",
		"rpm:100/400day":      "count out of range",
		"rpm:100/1500us":      "whole number of milliseconds",
		"rpm:2000000000000/s": "at most 1000000000000 tokens",
	} {
		_, err := parseLimit(spec)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), spec) {
			t.Errorf("parseLimit(%q) = %v; want an error naming the spec and containing %q", spec, err, want)
		}
	}
	if _, err := parseLimits([]string{"rpm:1", "rpm:2"}); err == nil || !strings.Contains(err.Error(), "appears twice") {
		t.Errorf("duplicate names: %v", err)
	}
}

// Formatting writes what parsing reads.
func TestFormatLimitRoundTrips(t *testing.T) {
	for _, spec := range []string{"rpm:100/min:150", "tpm:10000/min", "rps:10/s", "rph:5/h", "daily:5000/day",
		"batch:30/90s", "odd:3/90m", "w:9/168h", "a_b:1/250ms"} {
		l, err := parseLimit(spec)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := formatLimit(l)
		if !ok || got != spec {
			t.Errorf("formatLimit(parseLimit(%q)) = %q, %v", spec, got, ok)
		}
	}
	odd := limiter.Limit{Name: "x", Capacity: 10, Burst: 20, Refill: 5, Period: time.Second}
	if _, ok := formatLimit(odd); ok {
		t.Error("a limit whose capacity and refill differ has no spec")
	}
	if got := describeLimit(odd); got != "x(capacity 10, burst 20, refill 5 per s)" {
		t.Errorf("describeLimit = %q", got)
	}
}

func TestSparklineAndBar(t *testing.T) {
	if got := sparkline([]int64{0, 1, 4, 8, 0}, 10); got != " ▁▄█" {
		t.Errorf("sparkline = %q", got)
	}
	if got := sparkline([]int64{1, 1, 1, 1, 8, 8}, 3); got != "▁▁█" {
		t.Errorf("folded sparkline = %q", got)
	}
	if got := bar(5, 10, 10); got != "█████" {
		t.Errorf("bar = %q", got)
	}
	if bar(0, 10, 10) != "" || bar(3, 0, 10) != "" {
		t.Error("empty bars")
	}
}

func TestTimeToFull(t *testing.T) {
	l := limiter.PerMinute("rpm", 60).WithBurst(120)
	for tokens, want := range map[int64]time.Duration{120: 0, 200: 0, 60: time.Minute, 119: time.Second, -60: 3 * time.Minute} {
		if got := timeToFull(l, tokens); got != want {
			t.Errorf("timeToFull(%d) = %v, want %v", tokens, got, want)
		}
	}
	huge := limiter.Limit{Name: "h", Capacity: limiter.MaxTokens, Refill: 1, Period: 366 * 24 * time.Hour}
	if got := timeToFull(huge, 0); got <= 0 {
		t.Errorf("huge limit: %v", got)
	}
}
