package httplimit

import (
	"cmp"
	"math"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/shardlimit/limiter"
)

// Header field names.
const (
	HeaderRateLimit       = "RateLimit"        // each limit's units left and seconds to the next one
	HeaderRateLimitPolicy = "RateLimit-Policy" // each limit's quota and window, in seconds
	HeaderRetryAfter      = "Retry-After"      // whole seconds until a refused request may be retried
)

// ParentPrefix names a cascade parent's limits in the header fields and in
// problem bodies: the parent's "rpm" is "parent/rpm" (a limit name never
// contains '/').
const ParentPrefix = "parent/"

// Quota units the draft registers, for [WithQuotaUnits]. A limit without a
// unit counts requests, the draft's default, and its policy item carries
// no "qu" parameter.
const (
	UnitRequests           = "requests"            // one unit per request
	UnitContentBytes       = "content-bytes"       // bytes of content
	UnitConcurrentRequests = "concurrent-requests" // requests in flight
)

// SetLeaseHeaders sets the RateLimit-Policy and RateLimit fields on h for
// an admitted request: one item per limit of the lease, then one per limit
// of its cascade parent, each in name order, shadow limits left out (see
// [WithShadowLimits]). A lease of several resources
// (limiter.Request.Also) names the limits of the resources after the
// first "RESOURCE/NAME". units maps a limit name to
// its quota unit (see [WithQuotaUnits]; nil: every limit counts requests).
// It sets nothing for a nil lease or one granted under fail-open, which
// carries no state, nor on a nil h. The middleware sets the fields itself; call this when
// you call Acquire without it.
func SetLeaseHeaders(h http.Header, lease *limiter.Lease, units map[string]string) {
	if h == nil {
		return
	}
	fields{units: units}.setLease(h, lease, nil)
}

// SetRefusalHeaders sets RateLimit-Policy, RateLimit and Retry-After on h
// for a refused request, its items in name order and units as for
// [SetLeaseHeaders]. No "t" is above the Retry-After. It sets nothing for
// a nil error or a nil h.
func SetRefusalHeaders(h http.Header, e *limiter.RateLimitedError, units map[string]string) {
	if e == nil || h == nil {
		return
	}
	fields{units: units}.setRefusal(h, e)
}

// fields is how limits appear in the header fields: their units, their
// order and which of them are shown.
type fields struct {
	units map[string]string // limit name → quota unit; none: requests
	rank  map[string]int    // limit name → place; names without one follow, in name order
	keep  func(string) bool // nil: every limit
	// shadow shows shadow limits (limiter.Limit.Shadow) too; by default
	// they are left out: they refuse nothing, so a client must not pace
	// itself by them.
	shadow bool
}

// setLease sets the fields of an admitted request, with delta (reported
// cost minus charge, per limit name) taken from its limits as Adjust would.
func (f fields) setLease(h http.Header, lease *limiter.Lease, delta map[string]int64) {
	f.set(h, f.items(lease.Limits(), lease.ParentLimits()), delta, 0)
}

func (f fields) setRefusal(h http.Header, e *limiter.RateLimitedError) {
	ra := retryAfter(e)
	f.set(h, f.refusalStates(e), nil, ra)
	h.Set(HeaderRetryAfter, strconv.FormatInt(ra, 10))
}

// retryAfter is the Retry-After of a refusal in seconds: at least 1.
func retryAfter(e *limiter.RateLimitedError) int64 { return max(e.RetryAfterSeconds(), 1) }

// refusalStates returns the named states of the bucket that refused.
func (f fields) refusalStates(e *limiter.RateLimitedError) []namedState {
	if e.Parent {
		return f.items(nil, e.Limits)
	}
	return f.items(e.Limits, nil)
}

// namedState is a limit's state with the name it has in the fields.
type namedState struct {
	name   string
	parent bool
	also   bool // of a resource after the first
	limiter.LimitState
}

// items returns the states of own and parent limits that f keeps, in f's
// order: the entity's limits, then the parent's, each the first
// resource's, then the others', by rank, then name.
// The order depends only on the names, so it is the same on every answer.
// The limits of a resource other than the first state's are named
// "RESOURCE/NAME" (several resources in one acquire).
func (f fields) items(own, parent []limiter.LimitState) []namedState {
	out := make([]namedState, 0, len(own)+len(parent))
	first := ""
	if len(own) > 0 {
		first = own[0].Resource
	} else if len(parent) > 0 {
		first = parent[0].Resource
	}
	add := func(prefix string, ss []limiter.LimitState) {
		for _, s := range ss {
			n := prefix + s.Limit.Name
			if s.Resource != first {
				n = prefix + s.Resource + "/" + s.Limit.Name
			}
			if (f.keep == nil || f.keep(n)) && (f.shadow || !s.Limit.Shadow) {
				out = append(out, namedState{n, prefix != "", s.Resource != first, s})
			}
		}
	}
	add("", own)
	add(ParentPrefix, parent)
	// The entity's limits before the parent's, the first resource's before
	// the others'.
	group := func(s namedState) int { return 2*btoi(s.parent) + btoi(s.also) }
	slices.SortFunc(out, func(a, b namedState) int {
		return cmp.Or(cmp.Compare(group(a), group(b)), cmp.Compare(f.place(a.Limit.Name), f.place(b.Limit.Name)),
			strings.Compare(a.name, b.name))
	})
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (f fields) place(name string) int {
	if r, ok := f.rank[name]; ok {
		return r
	}
	return len(f.rank)
}

// maxSFInteger is the largest Integer a structured field can carry.
const maxSFInteger = 999_999_999_999_999

// quota returns a limit as a quota policy: q units per w seconds. A bucket
// holds at most its burst and refills it in burst × period / refill, so q
// is the burst and w that time rounded up to whole seconds (the draft has
// no sub-second windows). When that time is under a second, w is 1 and q
// what the bucket refills in a second.
//
// A calendar quota (l.Window set) is q = its Capacity per its window's
// nominal length: 86400 s for a day, 604800 for a week, 2592000 (30 days)
// for a month; the RateLimit field's t says when the current window ends.
//
// A concurrency cap (Window "concurrent") is q = its Capacity requests in
// flight, with no window (w 0: left out): its unit is
// [UnitConcurrentRequests].
func quota(l limiter.Limit) (q, w int64) {
	burst := l.EffectiveBurst()
	switch l.Window {
	case "concurrent":
		return burst, 0
	case "day":
		return burst, 86400
	case "week":
		return burst, 7 * 86400
	case "month":
		return burst, 30 * 86400
	}
	if l.Refill <= 0 || l.Period <= 0 {
		return burst, 1
	}
	secs := float64(burst) * l.Period.Seconds() / float64(l.Refill)
	if secs >= 1 {
		return burst, int64(math.Min(math.Ceil(secs), maxSFInteger))
	}
	return int64(float64(l.Refill) / l.Period.Seconds()), 1
}

// available returns the "r" and "t" of a state once delta more tokens are
// charged: r the whole units available (never below 0, never above the
// burst), t the seconds, rounded up, until one more unit is: the time
// within which the client can use no more than r. A bucket refills
// continuously, so more is available long before it is full: a 60-a-minute
// limit emptied has r=0 and t=1. A full bucket gains its next unit one
// refill interval after it is next charged, so its t is that interval.
//
// Reset is how long until the bucket holds its burst; the next unit comes
// as long before that as the units between it and the burst take to
// refill. For a sharded bucket Remaining and Reset are the charged shard's
// (times the shard count, for Remaining), which refills at refill / shards:
// an estimate, as they are.
func available(s limiter.LimitState, delta int64) (r, t int64) {
	q, _ := quota(s.Limit)
	n := max(s.Shards, 1)
	whole := floorDiv(s.Remaining-s.Reserved, n) - delta // the shard's whole tokens
	r = min(max(whole*n+s.Reserved, 0), q)
	if s.Limit.Window != "" {
		// A calendar quota: nothing comes back before its window ends.
		return r, min(max(s.ResetSeconds(), 1), maxSFInteger)
	}
	refill, period := s.Limit.Refill, s.Limit.Period.Milliseconds()
	if refill <= 0 || period <= 0 {
		return r, 1
	}
	// Times in ms × refill: one shard token takes per.
	per := big.NewInt(period * n)
	next := new(big.Int).Set(per) // a full bucket's
	if whole*n+s.Reserved < q {
		// Reset + delta tokens, less the tokens from the next unit to the burst.
		after := floorDiv(q, n) - max(whole, 0) - 1 - delta
		next.Mul(big.NewInt(max(s.Reset.Milliseconds(), 0)), big.NewInt(refill))
		next.Sub(next, new(big.Int).Mul(big.NewInt(after), per))
	}
	if next.Sign() <= 0 { // rounding: the unit is due now
		return r, 1
	}
	d := big.NewInt(refill * 1000) // a second; refill is at most 10^12
	secs, rem := next.QuoRem(next, d, new(big.Int))
	if rem.Sign() > 0 {
		secs.Add(secs, big.NewInt(1))
	}
	if !secs.IsInt64() || secs.Int64() > maxSFInteger {
		return r, maxSFInteger
	}
	return r, secs.Int64()
}

// floorDiv divides rounding toward negative infinity; b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// set sets RateLimit-Policy and RateLimit for ss, each charged delta[its
// limit's name] more; capT > 0 caps every "t" at capT seconds. With no
// states it sets nothing.
func (f fields) set(h http.Header, ss []namedState, delta map[string]int64, capT int64) {
	if len(ss) == 0 {
		return
	}
	var pol, cur strings.Builder
	for i, s := range ss {
		if i > 0 {
			pol.WriteString(", ")
			cur.WriteString(", ")
		}
		q, w := quota(s.Limit)
		writeSFString(&pol, s.name)
		pol.WriteString(";q=" + sfInt(q))
		u := f.units[s.Limit.Name]
		if s.Limit.Window == "concurrent" && u == "" {
			u = UnitConcurrentRequests
		}
		if u != "" && u != UnitRequests {
			pol.WriteString(";qu=")
			writeSFString(&pol, u)
		}
		if w > 0 {
			pol.WriteString(";w=" + sfInt(w))
		}
		r, t := available(s.LimitState, delta[s.Limit.Name])
		if capT > 0 {
			t = min(t, capT)
		}
		writeSFString(&cur, s.name)
		cur.WriteString(";r=" + sfInt(r) + ";t=" + sfInt(t))
	}
	h.Set(HeaderRateLimitPolicy, pol.String())
	h.Set(HeaderRateLimit, cur.String())
}

// sfInt formats n as a structured-field Integer, clamped to [0, 10^15).
func sfInt(n int64) string {
	return strconv.FormatInt(min(max(n, 0), maxSFInteger), 10)
}

// writeSFString writes s as a structured-field String: quoted, with '\'
// and '"' escaped and anything outside printable ASCII dropped.
func writeSFString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c <= 0x7e:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}
