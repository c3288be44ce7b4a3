package limiter

import (
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/internal/keys"
)

// Concurrency caps: a Limit with Window "concurrent" is at most Capacity
// leases in flight per bucket, each taking the slots its request's Consume
// names (usually 1) until Commit or Rollback gives them back, or until its
// TTL has passed (the holder died). docs/limiter.md says how a cap
// behaves.

// concurrent is the Window of a concurrency cap.
const concurrent = "concurrent"

// Bounds of a concurrency cap's TTL: long enough that clocks a little
// apart barely matter, short enough that a dead holder's slot comes back
// within the day.
const (
	minCapTTL = time.Second
	maxCapTTL = 24 * time.Hour
)

// concurrency reports whether l is a concurrency cap.
func (l Limit) concurrency() bool { return l.Window == concurrent }

// validateCap checks the fields of a concurrency cap (its name and
// capacity are checked); f names a field.
func (l Limit) validateCap(f func(string) string) error {
	switch {
	case l.Burst != 0 && l.Burst != l.Capacity:
		return invalid(f("Burst"), "%d must be 0 or Capacity (%d): a concurrency cap holds Capacity slots", l.Burst, l.Capacity)
	case l.Refill != 0:
		return invalid(f("Refill"), "%d must be 0: a concurrency cap has no refill, a slot comes back when its lease ends or its TTL passes", l.Refill)
	case l.Period != 0:
		return invalid(f("Period"), "%v must be 0: a concurrency cap's slots last until released or for TTL, not a refill period", l.Period)
	case l.TimeZone != "" || l.WeekStart != 0 || l.MonthDay != 0:
		return invalid(f("TimeZone"), "a concurrency cap has no calendar: leave TimeZone, WeekStart and MonthDay unset")
	case l.TTL == 0:
		return invalid(f("TTL"), "must be set: a concurrency cap needs the time to live of its leases (a dead holder's slot comes back after it), %v to %v", minCapTTL, maxCapTTL)
	case l.TTL < minCapTTL || l.TTL > maxCapTTL:
		return invalid(f("TTL"), "%v must be between %v and %v", l.TTL, minCapTTL, maxCapTTL)
	case l.TTL%time.Millisecond != 0:
		return invalid(f("TTL"), "%v must be a whole number of milliseconds", l.TTL)
	}
	return nil
}

// capEngineLimit converts a cap to the engine's limit: Capacity slots as
// millitokens, its TTL in ms.
func (l Limit) capEngineLimit() engine.Limit {
	n := l.Capacity * bucket.MilliPerToken
	return engine.Limit{Name: l.Name, Limit: bucket.Limit{Capacity: n, Burst: n}, TTL: l.TTL.Milliseconds()}
}

// parseCap reads s as a concurrency cap, name:n/concurrent:ttl[:shadow];
// ok is false when s is not one.
func parseCap(s string, bad func(part, format string, a ...any) (Limit, error)) (_ Limit, ok bool, _ error) {
	s, shadow := strings.CutSuffix(s, ":shadow")
	fields := strings.Split(s, ":")
	if len(fields) < 2 {
		return Limit{}, false, nil
	}
	nText, window, _ := strings.Cut(fields[1], "/")
	if window != concurrent {
		return Limit{}, false, nil
	}
	l := Limit{Name: fields[0], Window: concurrent, Shadow: shadow}
	var err error
	switch {
	case !keys.ValidLimitName(l.Name):
		_, err = bad("name", "%q %s", l.Name, keys.RuleLimitName)
	case len(fields) != 3:
		_, err = bad("ttl", "is missing: write name:n/concurrent:ttl, such as inflight:10/concurrent:5m")
	}
	if err != nil {
		return Limit{}, true, err
	}
	if l.Capacity, ok = wholeTokens(nText); !ok {
		_, err = bad("cap", "%q must be a whole number of leases between 1 and %d", nText, MaxTokens)
		return Limit{}, true, err
	}
	if l.TTL, ok = parsePeriod(fields[2]); !ok {
		_, err = bad("ttl", "%q must be a duration as a rate's period is written: s, min, h, a count and one of them (30s, 5min), or a Go duration (90s, 1h30m)", fields[2])
		return Limit{}, true, err
	}
	if part, rule := brokenRule(l, "ttl"); part != "" {
		_, err = bad(part, "%s", rule)
		return Limit{}, true, err
	}
	return l, true, nil
}

// capString writes a cap as ParseLimit reads it: "inflight:10/concurrent:5min",
// the TTL as a rate's period is written.
func (l Limit) capString(shadow string) string {
	return l.Name + ":" + strconv.FormatInt(l.Capacity, 10) + "/" + concurrent + ":" + formatPeriod(l.TTL) + shadow
}

// capRelease returns what the part holds of its concurrency caps, negated
// (millitokens): the write of a Commit.
func (part *leasePart) capRelease() map[string]int64 {
	out := make(map[string]int64)
	for name, v := range part.held() {
		if v > 0 && part.p.limit(name).concurrency() {
			out[name] = -v
		}
	}
	return out
}

// holdsSlots reports whether some part of the lease holds a concurrency
// cap's slots. The caller holds le.mu.
func (le *Lease) holdsSlots() bool {
	for i := range le.parts {
		if len(le.parts[i].capRelease()) > 0 {
			return true
		}
	}
	return false
}
