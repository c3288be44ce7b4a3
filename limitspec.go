package limiter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
)

// limitSyntax is the grammar of a limit written as text, for error messages
// and help: see [ParseLimit].
const limitSyntax = "name:rate/period[:burst][:shadow], such as rpm:100/min or tpm:10000/min:20000"

// periodUnits are the period's unit names; each may follow a count (5min).
var periodUnits = []struct {
	name string
	d    time.Duration
}{
	{"s", time.Second}, {"sec", time.Second}, {"second", time.Second},
	{"m", time.Minute}, {"min", time.Minute}, {"minute", time.Minute},
	{"h", time.Hour}, {"hour", time.Hour},
	{"d", 24 * time.Hour}, {"day", 24 * time.Hour},
}

// ParseLimit reads a limit written as text, as limiterctl's arguments and
// manifests and cmd/loadtest's -limits flag write it:
//
//	name:rate/period[:burst][:shadow]
//
// where:
//
//   - name is the limit's [Limit.Name].
//   - rate is a whole number of tokens, at least 1 ('_' may separate
//     digits: 10_000): the bucket's Capacity, and what it regains every
//     period.
//   - period is a unit (s, sec, second, m, min, minute, h, hour, d, day),
//     a count and a unit (10s, 5min, 7day), or a Go duration (250ms,
//     1h30m); between 1 ms and 366 days, a whole number of milliseconds.
//     It is required: there is no default period.
//   - burst, when given, is the most tokens the bucket holds (its Burst),
//     at least rate; without it the bucket holds rate tokens. To hold
//     fewer tokens than the rate, shorten the period: "rps:5/500ms" is 10
//     a second, at most 5 at once.
//   - ":shadow", when given, makes it a shadow limit ([Limit.Shadow]).
//
// So "rpm:100/min:150" is PerMinute("rpm", 100).WithBurst(150): it starts
// with 100 tokens, regains 100 a minute and holds up to 150.
//
// Errors are a *[ValidationError] (errors.Is(err, [ErrInvalid])) whose
// Field names the part of s that is wrong (name, rate, period or burst,
// and s) and whose Rule says what it must be.
func ParseLimit(s string) (Limit, error) {
	spec := fmt.Sprintf("limit %q", s)
	bad := func(part, format string, a ...any) (Limit, error) {
		return Limit{}, invalid(part+" of "+spec, format, a...)
	}
	fields := strings.Split(s, ":")
	shadow := len(fields) > 2 && fields[len(fields)-1] == "shadow"
	if shadow {
		fields = fields[:len(fields)-1]
	}
	if len(fields) < 2 || len(fields) > 3 {
		return Limit{}, invalid(spec, "must be %s", limitSyntax)
	}
	name, ratePeriod := fields[0], fields[1]
	rateText, periodText, hasPeriod := strings.Cut(ratePeriod, "/")
	if !keys.ValidLimitName(name) {
		return bad("name", "%q %s", name, keys.RuleLimitName)
	}
	rate, ok := wholeTokens(rateText)
	if !ok {
		return bad("rate", "%q must be a whole number of tokens between 1 and %d", rateText, MaxTokens)
	}
	if !hasPeriod {
		return bad("period", "is missing: write %s", limitSyntax)
	}
	period, ok := parsePeriod(periodText)
	if !ok {
		return bad("period", "%q must be s, sec, second, m, min, minute, h, hour, d or day, a count and one of them (5min), or a Go duration (250ms, 1h30m)", periodText)
	}
	l := Limit{Name: name, Capacity: rate, Burst: rate, Refill: rate, Period: period, Shadow: shadow}
	if len(fields) == 3 {
		if l.Burst, ok = wholeTokens(fields[2]); !ok {
			return bad("burst", "%q must be a whole number of tokens between the rate (%d) and %d", fields[2], rate, MaxTokens)
		}
		if l.Burst < rate {
			return bad("burst", "%d must be at least the rate (%d); to hold fewer tokens than the rate, shorten the period", l.Burst, rate)
		}
	}
	if err := l.Validate(); err != nil {
		// Only the name's reserved word and the period's range are left to
		// break a rule here.
		part, rule := "period", err.Error()
		var ve *ValidationError
		if errors.As(err, &ve) {
			rule = ve.Rule
			if strings.HasSuffix(ve.Field, "Name") {
				part = "name"
			}
		}
		return bad(part, "%s", rule)
	}
	return l, nil
}

// wholeTokens reads a whole number of tokens in [1, MaxTokens].
func wholeTokens(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if s == "" || s[0] == '_' || err != nil || n < 1 || n > MaxTokens {
		return 0, false
	}
	return n, true
}

// parsePeriod reads a unit, a count and a unit, or a Go duration. A count
// too large for any valid period gives a period over 366 days, for
// Validate to report.
func parsePeriod(s string) (time.Duration, bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	for _, u := range periodUnits {
		if s[i:] != u.name {
			continue
		}
		if i == 0 {
			return u.d, true
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n > int64(367*24*time.Hour/u.d) {
			n = int64(367 * 24 * time.Hour / u.d)
		}
		return time.Duration(n) * u.d, true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// String writes l as [ParseLimit] reads it ("rpm:100/min:150"; the burst
// only when it is not the rate), so that ParseLimit(l.String()) is l, with
// its Burst set, for every valid limit whose Capacity equals its Refill:
// every limit made by [PerSecond], [PerMinute], [PerHour] or [PerDay], with
// or without [Limit.WithBurst]. The period is written in the largest unit
// that divides it (day, h, min, s: "7day", "90min"), else as a Go duration
// ("250ms").
//
// A limit whose Capacity and Refill differ has no such text: String
// writes every field instead, as in "tpm(capacity 100000, burst 150000,
// refill 50000 per min)", which ParseLimit does not read.
func (l Limit) String() string {
	p := formatPeriod(l.Period)
	shadow := ""
	if l.Shadow {
		shadow = ":shadow"
	}
	if l.Capacity != l.Refill {
		return fmt.Sprintf("%s(capacity %d, burst %d, refill %d per %s)%s", l.Name, l.Capacity, l.EffectiveBurst(), l.Refill, p, shadow)
	}
	s := l.Name + ":" + strconv.FormatInt(l.Refill, 10) + "/" + p
	if b := l.EffectiveBurst(); b != l.Capacity {
		s += ":" + strconv.FormatInt(b, 10)
	}
	return s + shadow
}

// formatPeriod writes d in the largest of day, h, min and s that divides
// it, with a count when it is not 1; else as a Go duration.
func formatPeriod(d time.Duration) string {
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"day", 24 * time.Hour}, {"h", time.Hour}, {"min", time.Minute}, {"s", time.Second}} {
		switch {
		case d == u.d:
			return u.name
		case d > 0 && d%u.d == 0:
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}
