package limiter

import (
	"slices"
	"strconv"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
)

func checkEntity(field, id string) error {
	if !keys.ValidEntity(id) {
		return invalid(field, "%q %s", id, keys.RuleEntity)
	}
	return nil
}

func checkResource(field, r string) error {
	if !keys.ValidResource(r) {
		return invalid(field, "%q %s", r, keys.RuleResource)
	}
	return nil
}

// Validate reports whether l is a valid limit, naming the first field that
// breaks a rule.
func (l Limit) Validate() error {
	f := func(name string) string { return "Limit[" + l.Name + "]." + name }
	switch {
	case !keys.ValidLimitName(l.Name):
		return invalid("Limit.Name", "%q %s", l.Name, keys.RuleLimitName)
	case l.Name == wcuName:
		return invalid("Limit.Name", `"wcu" is reserved for the limiter's own per-partition write limit`)
	case l.Capacity < 1 || l.Capacity > MaxTokens:
		return invalid(f("Capacity"), "%d must be between 1 and %d tokens", l.Capacity, MaxTokens)
	case l.concurrency():
		return l.validateCap(f)
	case l.TTL != 0:
		return invalid(f("TTL"), "%v is for a concurrency cap only: set Window to \"concurrent\", or leave TTL 0", l.TTL)
	case l.quota():
		return l.validateQuota(f)
	case l.TimeZone != "":
		return invalid(f("TimeZone"), "%q is for a quota only: set Window (day, week or month), or leave TimeZone empty", l.TimeZone)
	case l.WeekStart != 0:
		return invalid(f("WeekStart"), "%v is for a week quota only: set Window to \"week\", or leave WeekStart 0", l.WeekStart)
	case l.MonthDay != 0:
		return invalid(f("MonthDay"), "%d is for a month quota only: set Window to \"month\", or leave MonthDay 0", l.MonthDay)
	case l.Burst != 0 && (l.Burst < l.Capacity || l.Burst > MaxTokens):
		return invalid(f("Burst"), "%d must be 0 (= Capacity) or between Capacity (%d) and %d tokens", l.Burst, l.Capacity, MaxTokens)
	case l.Refill < 1 || l.Refill > MaxTokens:
		return invalid(f("Refill"), "%d must be between 1 and %d tokens", l.Refill, MaxTokens)
	case l.Period < time.Millisecond || l.Period > time.Duration(bucket.MaxRefillPeriod)*time.Millisecond:
		return invalid(f("Period"), "%v must be between 1ms and 366 days", l.Period)
	case l.Period%time.Millisecond != 0:
		return invalid(f("Period"), "%v must be a whole number of milliseconds", l.Period)
	}
	return nil
}

// validateQuota checks the fields of a calendar quota (its name and
// capacity are checked); f names a field.
func (l Limit) validateQuota(f func(string) string) error {
	cal, err := l.calendar()
	switch {
	case l.Burst != 0 && l.Burst != l.Capacity:
		return invalid(f("Burst"), "%d must be 0 or Capacity (%d): a quota holds Capacity tokens per window", l.Burst, l.Capacity)
	case l.Refill != 0:
		return invalid(f("Refill"), "%d must be 0: a quota has no refill, it is back at Capacity at each window's start", l.Refill)
	case l.Period != 0:
		return invalid(f("Period"), "%v must be 0: a quota's window is its Window (%s), not a refill period", l.Period, l.Window)
	case cal.Window == 0:
		return invalid(f("Window"), "%q must be day, week or month (the windows with a calendar boundary)", l.Window)
	case err != nil:
		return invalid(f("TimeZone"), "%q does not load as an IANA time zone (such as Europe/Paris): %v", l.TimeZone, err)
	case l.WeekStart < time.Sunday || l.WeekStart > time.Saturday:
		return invalid(f("WeekStart"), "%d must be a day of the week, 0 (Sunday) to 6 (Saturday)", int(l.WeekStart))
	case l.WeekStart != 0 && cal.Window != bucket.Week:
		return invalid(f("WeekStart"), "%v is for a week quota only; this one's window is a %s", l.WeekStart, l.Window)
	case l.MonthDay < 0 || l.MonthDay > 31:
		return invalid(f("MonthDay"), "%d must be 1 to 31 (0 is 1)", l.MonthDay)
	case l.MonthDay != 0 && cal.Window != bucket.Month:
		return invalid(f("MonthDay"), "%d is for a month quota only; this one's window is a %s", l.MonthDay, l.Window)
	}
	return nil
}

// maxLimits bounds the limits of one request: each adds eight attributes
// and a few expression terms to the bucket item, which must stay well
// under DynamoDB's 4 KB expression and 1 KB-per-WCU item sizes.
const maxLimits = 16

// maxResources bounds the resources of one acquire (Request.Resource and
// Request.Also): their writes go out together, one round trip of up to 16
// concurrent writes (32 with a cascade).
const maxResources = 16

func checkLimits(field string, ls []Limit) error {
	if len(ls) > maxLimits {
		return invalid(field, "%d limits; at most %d", len(ls), maxLimits)
	}
	for i, l := range ls {
		if err := l.Validate(); err != nil {
			return err
		}
		for _, m := range ls[:i] {
			if m.Name == l.Name {
				return invalid(field, "limit %q appears twice", l.Name)
			}
		}
	}
	return nil
}

// checkRequest checks what can be checked of an acquire before any I/O;
// resource is the request's or the default. Consume is checked against the
// limits that apply once stored limits are known (checkConsume).
func checkRequest(req Request, resource string) error {
	if err := checkEntity("Request.Entity", req.Entity); err != nil {
		return err
	}
	if err := checkResource("Request.Resource", resource); err != nil {
		return err
	}
	if len(req.Also) > maxResources-1 {
		return invalid("Request.Also", "%d resources with Request.Resource; at most %d", len(req.Also)+1, maxResources)
	}
	for i, r := range req.Also {
		field := "Request.Also[" + strconv.Itoa(i) + "]"
		if err := checkResource(field, r); err != nil {
			return err
		}
		if r == resource {
			return invalid(field, "%q is Request.Resource: each resource is charged once", r)
		}
		if slices.Contains(req.Also[:i], r) {
			return invalid(field, "%q appears twice: each resource is charged once", r)
		}
	}
	if err := checkLimits("Request.Limits", req.Limits); err != nil {
		return err
	}
	if req.Policy > FailOpen {
		return invalid("Request.Policy", "unknown policy %d", req.Policy)
	}
	if len(req.Consume) == 0 {
		return invalid("Request.Consume", "must name at least one limit")
	}
	if accounted(req.Limits, req.Consume, false) {
		return nil
	}
	// The first bad entry in name order, so the error is the same every
	// time. found, not bad != "": "" is a name, and a bad one.
	bad, found := "", false
	for name, n := range req.Consume {
		if (n < 1 || n > MaxTokens || !keys.ValidLimitName(name)) && (!found || name < bad) {
			bad, found = name, true
		}
	}
	switch {
	case !found:
		return nil
	case !keys.ValidLimitName(bad):
		return invalid("Request.Consume["+bad+"]", "limit name %q %s", bad, keys.RuleLimitName)
	}
	return invalid("Request.Consume["+bad+"]", "%d must be between 1 and %d tokens", req.Consume[bad], MaxTokens)
}

// checkConsume checks a request's Consume against the limits that apply to
// a bucket (whose says which bucket, for a cascade parent): every name
// must be one of them, and no amount may exceed its burst (it could never
// be admitted).
func checkConsume(limits []Limit, consume map[string]int64, whose string) error {
	if len(limits) == 0 {
		return invalid("Request.Limits", "no limits apply%s: none in the request, no default limits (WithDefaultLimits) and none stored for the entity or resource", whose)
	}
	if accounted(limits, consume, true) {
		return nil
	}
	// The first bad entry in name order (seen, not bad != "": "" is a name).
	bad, seen, found := "", false, false
	for name, n := range consume {
		if !seen || name < bad {
			if x, ok := limitNamed(limits, name); !ok || n > x.EffectiveBurst() {
				bad, seen, found = name, true, ok
			}
		}
	}
	switch {
	case !seen:
		return nil
	case !found:
		return invalid("Request.Consume["+bad+"]", "no limit named %q applies%s (not in the request's limits, the default limits or the limits stored for the entity or resource)", bad, whose)
	}
	x, _ := limitNamed(limits, bad)
	return invalid("Request.Consume["+bad+"]", "%d tokens exceeds the burst %d%s: it could never be admitted", consume[bad], x.EffectiveBurst(), whose)
}

// accounted reports whether limits (distinctly named: checkLimits,
// mergeLimits) name every amount of consume and each is between 1 token
// and MaxTokens, or the limit's burst when toBurst. It looks each limit
// up, which is cheaper than walking the map when there are few more limits
// than amounts; false says nothing about the error: walk the map to find
// the one to report.
func accounted(limits []Limit, consume map[string]int64, toBurst bool) bool {
	if len(limits) == 0 || len(limits) > len(consume)+2 {
		return false
	}
	ok := 0
	for _, x := range limits {
		most := int64(MaxTokens)
		if toBurst {
			most = x.EffectiveBurst()
		}
		if n, found := consume[x.Name]; found && n >= 1 && n <= most {
			ok++
		}
	}
	return ok == len(consume)
}

func limitNamed(ls []Limit, name string) (Limit, bool) {
	for _, x := range ls {
		if x.Name == name {
			return x, true
		}
	}
	return Limit{}, false
}
