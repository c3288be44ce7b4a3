package httplimit

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/shardlimit/limiter"
)

// Header field names.
const (
	HeaderRateLimit       = "RateLimit"
	HeaderRateLimitPolicy = "RateLimit-Policy"
	HeaderRetryAfter      = "Retry-After"
)

// ParentPrefix names a cascade parent's limits in the header fields and in
// problem bodies: the parent's "rpm" is "parent/rpm" (a limit name never
// contains '/').
const ParentPrefix = "parent/"

// SetLeaseHeaders sets the RateLimit-Policy and RateLimit fields on h for
// an admitted request: one item per limit of the lease, its cascade
// parent's included, tightest first (see the package documentation for
// the values). It sets nothing for a nil lease or one granted under
// fail-open, which carries no state. The middleware calls it; call it
// yourself when you call Acquire without the middleware.
func SetLeaseHeaders(h http.Header, lease *limiter.Lease) {
	setFields(h, named(lease.Limits(), lease.ParentLimits(), nil), 0)
}

// SetRefusalHeaders sets RateLimit-Policy, RateLimit and Retry-After on h
// for a refused request. Every effective window ("t") is capped at the
// Retry-After, so that no field tells the client to wait longer than
// Retry-After does. It sets nothing for a nil error.
func SetRefusalHeaders(h http.Header, e *limiter.RateLimitedError) {
	if e == nil {
		return
	}
	setRefusal(h, e, nil)
}

func setRefusal(h http.Header, e *limiter.RateLimitedError, keep func(string) bool) {
	ra := retryAfter(e)
	setFields(h, refusalStates(e, keep), ra)
	h.Set(HeaderRetryAfter, strconv.FormatInt(ra, 10))
}

// retryAfter is the Retry-After of a refusal in seconds: at least 1.
func retryAfter(e *limiter.RateLimitedError) int64 { return max(e.RetryAfterSeconds(), 1) }

// refusalStates returns the named states of the bucket that refused.
func refusalStates(e *limiter.RateLimitedError, keep func(string) bool) []namedState {
	if e.Parent {
		return named(nil, e.Limits, keep)
	}
	return named(e.Limits, nil, keep)
}

// namedState is a limit's state with the name it has in the fields.
type namedState struct {
	name string
	limiter.LimitState
}

// named returns the states of own and parent limits kept by keep (nil
// keeps all), tightest first: exceeded limits (the longest wait first),
// then by the fraction of the burst remaining, then by name.
func named(own, parent []limiter.LimitState, keep func(string) bool) []namedState {
	out := make([]namedState, 0, len(own)+len(parent))
	add := func(prefix string, ss []limiter.LimitState) {
		for _, s := range ss {
			if n := prefix + s.Limit.Name; keep == nil || keep(n) {
				out = append(out, namedState{n, s})
			}
		}
	}
	add("", own)
	add(ParentPrefix, parent)
	slices.SortStableFunc(out, func(a, b namedState) int {
		if a.Exceeded != b.Exceeded {
			if a.Exceeded {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.RetryAfter, a.RetryAfter); c != 0 {
			return c
		}
		if c := cmp.Compare(fractionLeft(a.LimitState), fractionLeft(b.LimitState)); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

func fractionLeft(s limiter.LimitState) float64 {
	q, _ := quota(s.Limit)
	return float64(s.Remaining) / float64(max(q, 1))
}

// maxSFInteger is the largest Integer a structured field can carry.
const maxSFInteger = 999_999_999_999_999

// quota returns a limit as a quota policy: q tokens per w seconds. A
// bucket holds at most its burst and refills it in burst × period /
// refill, so q is the burst and w that time rounded up to whole seconds
// (the draft has no sub-second windows). When that time is under a second,
// w is 1 and q what the bucket refills in a second.
func quota(l limiter.Limit) (q, w int64) {
	burst := l.Burst
	if burst == 0 {
		burst = l.Capacity
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

// setFields sets RateLimit-Policy and RateLimit for ss; capT > 0 caps
// every "t" at capT seconds. With no states it sets nothing.
func setFields(h http.Header, ss []namedState, capT int64) {
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
		pol.WriteString(";q=" + sfInt(q) + ";w=" + sfInt(w))
		t := s.ResetSeconds()
		if capT > 0 {
			t = min(t, capT)
		}
		writeSFString(&cur, s.name)
		cur.WriteString(";r=" + sfInt(s.Remaining) + ";t=" + sfInt(t))
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
