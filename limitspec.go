package limiter

import (
	"errors"
	"fmt"
	"slices"
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
// A calendar quota (see [Limit.Window]) is written
//
//	name:n/window[:anchor][@zone][:shadow]
//
// where n is the quota per window (its Capacity), window is day, week or
// month, anchor is a week's first day (sun, mon, tue, wed, thu, fri, sat;
// sun when left out) or a month's first day (1 to 31; 1 when left out),
// and zone is an IANA time zone (UTC when left out). So
// "tokens:1000000/month" is a million tokens a calendar month in UTC, and
// "usd:50000000/month:15@Europe/Paris" is fifty million a month from the
// 15th, at midnight in Paris; "usd:5/month@Europe/Paris:shadow" is a
// shadow quota. A daily quota needs its zone, UTC included
// ("req:20/day@UTC"): without one, "req:20/day" is the rate of 20 tokens
// every 24 hours, refilled continuously.
//
// A concurrency cap (Window "concurrent", see [Limit.TTL]) is written
//
//	name:n/concurrent:ttl[:shadow]
//
// where n is the most leases in flight (its Capacity) and ttl the leases'
// time to live, written as a rate's period (5min, 30s, 90s): for example
// "inflight:10/concurrent:5min".
//
// Errors are a *[ValidationError] (errors.Is(err, [ErrInvalid])) whose
// Field names the part of s that is wrong (name, rate, period or burst,
// and s) and whose Rule says what it must be.
func ParseLimit(s string) (Limit, error) {
	spec := fmt.Sprintf("limit %q", s)
	bad := func(part, format string, a ...any) (Limit, error) {
		return Limit{}, invalid(part+" of "+spec, format, a...)
	}
	if l, ok, err := parseQuota(s, bad); ok {
		return l, err
	}
	if l, ok, err := parseCap(s, bad); ok {
		return l, err
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
	// Only the name's reserved word and the period's range are left to
	// break a rule here.
	if part, rule := brokenRule(l, "period"); part != "" {
		return bad(part, "%s", rule)
	}
	return l, nil
}

// brokenRule validates a limit parsed from text and names the part of the
// text that breaks a rule: "name" when the rule is the name's, else other
// (the one other part that can still break one); "" when l is valid.
func brokenRule(l Limit, other string) (part, rule string) {
	err := l.Validate()
	if err == nil {
		return "", ""
	}
	part, rule = other, err.Error()
	var ve *ValidationError
	if errors.As(err, &ve) {
		rule = ve.Rule
		if strings.HasSuffix(ve.Field, "Name") {
			part = "name"
		}
	}
	return part, rule
}

// weekdays are the anchors of a week quota, Sunday first.
var weekdays = [...]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// parseQuota reads s as a calendar quota; ok is false when s's window is
// not day, week or month (s is then a rate, or wrong as one).
func parseQuota(s string, bad func(part, format string, a ...any) (Limit, error)) (_ Limit, ok bool, _ error) {
	s, shadow := strings.CutSuffix(s, ":shadow") // after the zone, which has no ':'
	body, zone, hasZone := strings.Cut(s, "@")
	fields := strings.Split(body, ":")
	if len(fields) < 2 || len(fields) > 3 {
		return Limit{}, false, nil
	}
	nText, window, _ := strings.Cut(fields[1], "/")
	if window != "week" && window != "month" && (window != "day" || !hasZone) {
		return Limit{}, false, nil // "/day" alone is a rate's period
	}
	l := Limit{Name: fields[0], Window: window, TimeZone: zone, Shadow: shadow}
	var err error
	if !keys.ValidLimitName(l.Name) {
		_, err = bad("name", "%q %s", l.Name, keys.RuleLimitName)
		return Limit{}, true, err
	}
	if l.Capacity, ok = wholeTokens(nText); !ok {
		_, err = bad("quota", "%q must be a whole number of tokens between 1 and %d", nText, MaxTokens)
		return Limit{}, true, err
	}
	if hasZone && zone == "" {
		_, err = bad("zone", "is empty after '@': write an IANA time zone such as Europe/Paris, or leave out the '@'")
		return Limit{}, true, err
	}
	if len(fields) == 3 {
		anchor := fields[2]
		switch window {
		case "week":
			i := slices.Index(weekdays[:], anchor)
			if i < 0 {
				_, err = bad("anchor", "%q must be the week's first day: sun, mon, tue, wed, thu, fri or sat", anchor)
				return Limit{}, true, err
			}
			l.WeekStart = time.Weekday(i)
		case "month":
			d, perr := strconv.Atoi(anchor)
			if perr != nil || d < 1 || d > 31 {
				_, err = bad("anchor", "%q must be the month's first day, 1 to 31", anchor)
				return Limit{}, true, err
			}
			l.MonthDay = d
		default:
			_, err = bad("anchor", "%q: a day quota takes no anchor (a day starts at midnight)", anchor)
			return Limit{}, true, err
		}
	}
	// Only the name's reserved word and the zone are left to break a rule
	// here.
	if part, rule := brokenRule(l, "zone"); part != "" {
		_, err = bad(part, "%s", rule)
		return Limit{}, true, err
	}
	if l.MonthDay == 1 {
		l.MonthDay = 0 // one way to write the default
	}
	return l, true, nil
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
//
// A quota is written as ParseLimit reads it ("usd:50000000/month:15@Europe/Paris",
// its anchor and zone only when set), and ParseLimit(l.String()) is l for
// every valid quota with a Burst of 0 and a MonthDay other than 1.
func (l Limit) String() string {
	shadow := ""
	if l.Shadow {
		shadow = ":shadow"
	}
	if l.concurrency() {
		return l.capString(shadow)
	}
	if l.quota() {
		s := l.Name + ":" + strconv.FormatInt(l.Capacity, 10) + "/" + l.Window
		switch {
		case l.WeekStart > time.Sunday && l.WeekStart <= time.Saturday:
			s += ":" + weekdays[l.WeekStart]
		case l.MonthDay > 1:
			s += ":" + strconv.Itoa(l.MonthDay)
		}
		switch {
		case l.TimeZone != "":
			s += "@" + l.TimeZone
		case l.Window == "day":
			s += "@UTC" // "/day" alone is a rate's period
		}
		return s + shadow
	}
	p := formatPeriod(l.Period)
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
