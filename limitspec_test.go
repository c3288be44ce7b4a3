package limiter_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
)

func TestParseLimit(t *testing.T) {
	day := 24 * time.Hour
	for spec, want := range map[string]limiter.Limit{
		"rpm:100/min:150":       limiter.PerMinute("rpm", 100).WithBurst(150),
		"tpm:10000/min":         limiter.PerMinute("tpm", 10000),
		"tpm:10_000/m":          limiter.PerMinute("tpm", 10000),
		"tpm:10000/minute":      limiter.PerMinute("tpm", 10000),
		"rps:10/s":              limiter.PerSecond("rps", 10),
		"rps:10/sec":            limiter.PerSecond("rps", 10),
		"rps:10/second":         limiter.PerSecond("rps", 10),
		"rph:5/hour":            limiter.PerHour("rph", 5),
		"x:5/h":                 limiter.PerHour("x", 5),
		"daily:5000/day":        limiter.PerDay("daily", 5000),
		"daily:5000/d":          limiter.PerDay("daily", 5000),
		"weekly:9/7day":         {Name: "weekly", Capacity: 9, Burst: 9, Refill: 9, Period: 7 * day},
		"tpm:10000/10s:20000":   {Name: "tpm", Capacity: 10000, Burst: 20000, Refill: 10000, Period: 10 * time.Second},
		"batch:30/90s":          {Name: "batch", Capacity: 30, Burst: 30, Refill: 30, Period: 90 * time.Second},
		"odd:3/1h30m":           {Name: "odd", Capacity: 3, Burst: 3, Refill: 3, Period: 90 * time.Minute},
		"gpt-3.5:7/min:9":       limiter.PerMinute("gpt-3.5", 7).WithBurst(9),
		"a_b:1/250ms":           {Name: "a_b", Capacity: 1, Burst: 1, Refill: 1, Period: 250 * time.Millisecond},
		"five:1/5min":           {Name: "five", Capacity: 1, Burst: 1, Refill: 1, Period: 5 * time.Minute},
		"year:1/366day":         {Name: "year", Capacity: 1, Burst: 1, Refill: 1, Period: 366 * day},
		"big:1000000000000/min": limiter.PerMinute("big", limiter.MaxTokens),
		"rpd:5/day:shadow":      {Name: "rpd", Capacity: 5, Burst: 5, Refill: 5, Period: day, Shadow: true},
		"rpd:5/day:9:shadow":    {Name: "rpd", Capacity: 5, Burst: 9, Refill: 5, Period: day, Shadow: true},
	} {
		got, err := limiter.ParseLimit(spec)
		if err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", spec, got, err, want)
		}
	}
}

// Every error is a ValidationError naming the spec and the part that is
// wrong (its Field), and saying what that part must be (its Rule).
func TestParseLimitErrors(t *testing.T) {
	for _, c := range []struct{ spec, field, rule string }{
		{"rpm", `limit "rpm"`, "must be name:rate/period[:burst]"},
		{"rpm:1/s:2:3", `limit "rpm:1/s:2:3"`, "must be name:rate/period[:burst]"},
		{"", `limit ""`, "must be name:rate/period[:burst]"},
		{":100/min", `name of limit ":100/min"`, `"" must match ^[a-zA-Z]`},
		{"9rpm:100/min", `name of limit "9rpm:100/min"`, `"9rpm" must match ^[a-zA-Z]`},
		{"wcu:100/min", `name of limit "wcu:100/min"`, `"wcu" is reserved`},
		{"rpm:abc/min", `rate of limit "rpm:abc/min"`, `"abc" must be a whole number of tokens between 1 and 1000000000000`},
		{"rpm:0/min", `rate of limit "rpm:0/min"`, `"0" must be a whole number of tokens between 1`},
		{"rpm:-5/min", `rate of limit "rpm:-5/min"`, `"-5" must be a whole number of tokens between 1`},
		{"rpm:/min", `rate of limit "rpm:/min"`, `"" must be a whole number`},
		{"rpm:_1/min", `rate of limit "rpm:_1/min"`, `"_1" must be a whole number`},
		{"rpm:2000000000000/s", `rate of limit "rpm:2000000000000/s"`, "between 1 and 1000000000000"},
		{"rpm:100", `period of limit "rpm:100"`, "is missing: write name:rate/period[:burst]"},
		{"rpm:100:150", `period of limit "rpm:100:150"`, "is missing"},
		{"rpm:100/fortnight", `period of limit "rpm:100/fortnight"`, `"fortnight" must be s, sec, second, m, min`},
		{"rpm:100/", `period of limit "rpm:100/"`, `"" must be s, sec`},
		{"rpm:5/0s", `period of limit "rpm:5/0s"`, "0s must be between 1ms and 366 days"},
		{"rpm:5/0min", `period of limit "rpm:5/0min"`, "0s must be between 1ms and 366 days"},
		{"rpm:5/-1s", `period of limit "rpm:5/-1s"`, "-1s must be between 1ms and 366 days"},
		{"rpm:100/367day", `period of limit "rpm:100/367day"`, "must be between 1ms and 366 days"},
		{"rpm:100/99999999999999999999day", `period of limit "rpm:100/99999999999999999999day"`, "must be between 1ms and 366 days"},
		{"rpm:100/1500us", `period of limit "rpm:100/1500us"`, "must be a whole number of milliseconds"},
		{"rpm:100/min:50", `burst of limit "rpm:100/min:50"`, "50 must be at least the rate (100)"},
		{"rpm:100/min:x", `burst of limit "rpm:100/min:x"`, `"x" must be a whole number of tokens between the rate (100) and 1000000000000`},
		{"rpm:100/min:", `burst of limit "rpm:100/min:"`, `"" must be a whole number`},
	} {
		_, err := limiter.ParseLimit(c.spec)
		var ve *limiter.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("ParseLimit(%q) = %v; want a *ValidationError", c.spec, err)
			continue
		}
		if ve.Field != c.field || !strings.Contains(ve.Rule, c.rule) {
			t.Errorf("ParseLimit(%q): Field %q, Rule %q; want Field %q and a Rule containing %q", c.spec, ve.Field, ve.Rule, c.field, c.rule)
		}
		if !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), c.rule) {
			t.Errorf("ParseLimit(%q): message %q names neither the field nor the rule", c.spec, err)
		}
	}
}

// String writes what ParseLimit reads, in the largest unit of the period.
func TestLimitStringRoundTrips(t *testing.T) {
	for _, spec := range []string{"rpm:100/min:150", "tpm:10000/min", "rps:10/s", "rph:5/h", "daily:5000/day",
		"batch:30/90s", "odd:3/90min", "w:9/7day", "x:1/36h", "a_b:1/250ms", "c:1/1.5s", "tpm:10000/10s:20000", "rpd:5/day:shadow", "rpd:5/day:9:shadow"} {
		l, err := limiter.ParseLimit(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.String(); got != spec {
			t.Errorf("ParseLimit(%q).String() = %q", spec, got)
		}
	}
	for _, l := range []limiter.Limit{
		limiter.PerSecond("a", 1), limiter.PerMinute("b", 7).WithBurst(9), limiter.PerHour("c", 1e12), limiter.PerDay("d", 3),
		{Name: "e", Capacity: 5, Refill: 5, Period: 1500 * time.Millisecond}, // Burst 0: the capacity
		{Name: "f", Capacity: 2, Burst: 4, Refill: 2, Period: 366 * 24 * time.Hour},
	} {
		back, err := limiter.ParseLimit(l.String())
		if l.Burst == 0 {
			l.Burst = l.Capacity
		}
		if err != nil || back != l {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", l.String(), back, err, l)
		}
	}
	odd := limiter.Limit{Name: "x", Capacity: 10, Burst: 20, Refill: 5, Period: time.Second}
	if got := odd.String(); got != "x(capacity 10, burst 20, refill 5 per s)" {
		t.Errorf("String of a limit whose capacity and refill differ = %q", got)
	}
	if got := (limiter.Limit{}).String(); got != ":0/0s" {
		t.Errorf("the zero Limit's String = %q", got)
	}
}

func ExampleParseLimit() {
	l, err := limiter.ParseLimit("rpm:100/min:150")
	fmt.Println(l == limiter.PerMinute("rpm", 100).WithBurst(150), err)
	fmt.Println(l)

	_, err = limiter.ParseLimit("rpm:100")
	fmt.Println(err)
	// Output:
	// true <nil>
	// rpm:100/min:150
	// limiter: invalid period of limit "rpm:100": is missing: write name:rate/period[:burst][:shadow], such as rpm:100/min or tpm:10000/min:20000
}
