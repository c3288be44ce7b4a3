package limiter

import (
	"math"
	"time"

	"github.com/shardlimit/limiter/bucket"
)

// LimitState is one limit of a bucket as an answer saw it: the limit that
// applied, what is left, and when it is full again. A [Lease] carries one
// per limit for the write that admitted it, a [RateLimitedError] for the
// item that refused it, and [Limiter.Status] for a read: the first two cost
// no extra store call, they come from the item the write returned.
type LimitState struct {
	// Limit is the limit that applied to the whole bucket: a stored
	// override, else the caller's (or the limiter's default). It is not
	// divided by the shard count.
	Limit Limit `json:"limit"`
	// Shards is the bucket's shard count when the answer was made. Each
	// shard enforces Limit divided by Shards.
	Shards int64 `json:"shards"`
	// Requested is what the call asked of this limit, in tokens (0 for
	// Status).
	Requested int64 `json:"requested"`
	// Remaining is what the bucket holds after the call, in whole tokens
	// (rounded down; negative when adjustments put it in debt). For a
	// sharded bucket a write sees one shard: Remaining is that shard's
	// balance times Shards, an estimate of the whole (Status sums every
	// shard exactly).
	Remaining int64 `json:"remaining"`
	// Reset is how long until the limit is full again, if nothing more is
	// charged (0 when it is full now). For a sharded bucket it is the
	// shard's: shards refill in parallel, so it estimates the whole.
	Reset time.Duration `json:"reset"`
	// RetryAfter is how long until Requested tokens are available, if
	// nothing else is charged meanwhile; 0 when they are now. It saturates
	// at MaxRetryAfter.
	RetryAfter time.Duration `json:"retry_after"`
	// Exceeded is true when this limit refused the request.
	Exceeded bool `json:"exceeded"`
}

// MaxRetryAfter is the longest wait the limiter reports (about a hundred
// years). A wait that cannot end (the request exceeds the burst) or that
// would overflow a time.Duration (a debt of astronomical size) is reported
// as MaxRetryAfter, never as a wrapped or zero duration.
const MaxRetryAfter = 100 * 366 * 24 * time.Hour

// ResetSeconds returns Reset in whole seconds, rounded up: the "t" of an
// HTTP RateLimit header.
func (s LimitState) ResetSeconds() int64 { return ceilSeconds(s.Reset) }

// RetryAfterSeconds returns RetryAfter in whole seconds, rounded up: the
// value of an HTTP Retry-After header.
func (s LimitState) RetryAfterSeconds() int64 { return ceilSeconds(s.RetryAfter) }

// RetryAfterSeconds returns the error's RetryAfter in whole seconds,
// rounded up (at least 1 when there is any wait): the value of an HTTP
// Retry-After header. It is 0 for a nil error.
func (e *RateLimitedError) RetryAfterSeconds() int64 {
	if e == nil {
		return 0
	}
	return ceilSeconds(e.RetryAfter)
}

// ceilSeconds rounds d up to whole seconds; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// msDuration converts a wait in milliseconds to a Duration, saturating at
// MaxRetryAfter (waits from bucket math may be up to math.MaxInt64 ms).
func msDuration(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	if ms >= int64(MaxRetryAfter/time.Millisecond) {
		return MaxRetryAfter
	}
	return time.Duration(ms) * time.Millisecond
}

// limitState describes limit s of the image at now, per shard, scaled to
// the whole bucket of n shards. requested is in millitokens; judge says
// whether to judge it (a refusal: RetryAfter and Exceeded are set).
func limitState(s *spec, im *image, n, now, requested int64, judge bool) LimitState {
	st, rf := im.projected(s, n, now)
	return stateOf(s, st, rf, n, now, requested, judge)
}

func stateOf(s *spec, st bucket.State, rf, n, now, requested int64, judge bool) LimitState {
	ls := LimitState{Limit: s.limit, Shards: n, Requested: requested / bucket.MilliPerToken,
		Remaining: bucket.WholeTokens(satMul(st.Tokens, n))}
	if full := st.FullAt(rf); full > now {
		ls.Reset = msDuration(full - now)
	}
	if judge && st.Tokens < requested {
		ls.Exceeded = true
		if w, ok := st.RetryAfter(rf, now, requested); ok {
			ls.RetryAfter = msDuration(w)
		} else {
			// Only a shard of a sharded bucket can be too small for a
			// request (a whole bucket's burst covers any valid one): another
			// shard, tried next time, may serve it.
			ls.RetryAfter = s.limit.Period
		}
	}
	return ls
}

// statesAfter returns the state of every application limit of the plan
// as the image shows it at now. charge says the image predates this plan's
// charge (a transaction returns no item), which is then deducted.
func (p *plan) statesAfter(im *image, n, now int64, charge bool) []LimitState {
	if im == nil {
		return nil
	}
	out := make([]LimitState, 0, len(p.specs)-1)
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden {
			continue
		}
		st, rf := im.projected(s, n, now)
		if charge {
			st.Tokens -= s.amount
		}
		out = append(out, stateOf(s, st, rf, n, now, s.amount, false))
	}
	return out
}

// satMul is a*b saturating at the int64 limits (b >= 1).
func satMul(a, b int64) int64 {
	if b <= 1 || a == 0 {
		return a
	}
	if a > 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	if a < 0 && a < math.MinInt64/b {
		return math.MinInt64
	}
	return a * b
}
