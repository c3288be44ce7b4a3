package main

import (
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

// The limit syntax is limiter.ParseLimit's (tested there); limiterctl adds
// the distinct names of a list and the period alone, for manifests'
// mapping form.
func TestParseLimitsAndPeriods(t *testing.T) {
	ls, err := parseLimits([]string{"rpm:100/min:150", "tpm:10000/min"})
	if err != nil || len(ls) != 2 || ls[0] != limiter.PerMinute("rpm", 100).WithBurst(150) {
		t.Errorf("parseLimits = %+v, %v", ls, err)
	}
	if _, err := parseLimits([]string{"rpm:1/s", "rpm:2/s"}); err == nil || !strings.Contains(err.Error(), "appears twice") {
		t.Errorf("duplicate names: %v", err)
	}
	for text, d := range map[string]time.Duration{"min": time.Minute, "90s": 90 * time.Second, "7day": 7 * 24 * time.Hour, "250ms": 250 * time.Millisecond} {
		if got, err := parsePeriod(text); got != d || err != nil {
			t.Errorf("parsePeriod(%q) = %v, %v", text, got, err)
		}
		if got := formatPeriod(d); got != text {
			t.Errorf("formatPeriod(%v) = %q, want %q", d, got, text)
		}
	}
	if _, err := parsePeriod("0s"); err == nil || err.Error() != "0s must be between 1ms and 366 days" {
		t.Errorf("parsePeriod(0s): %v", err)
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
