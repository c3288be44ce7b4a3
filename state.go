package limiter

import (
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/engine"
)

// LimitState is one limit of a bucket as an answer saw it: the limit that
// applied, what is left, and when it is full again. A [Lease] carries one
// per limit for the write that admitted it, a [RateLimitedError] for the
// item that refused it, and [Limiter.Status] for a read: the first two cost
// no extra store call, they come from the item the write returned.
type LimitState struct {
	// Resource is the resource of the bucket: an answer for an acquire of
	// several resources (Request.Also) has each resource's limits.
	Resource string `json:"resource"`
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
	// Reserved is what this process holds of the limit in its reservation
	// pool (see WithReservations), in tokens, included in Remaining; 0
	// without reservations.
	Reserved int64
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

// state converts an engine view of one limit.
func (bp bucketPlan) state(v engine.View) LimitState {
	ls := LimitState{Resource: bp.Ref.Resource, Limit: bp.limit(v.Name), Shards: v.Shards, Requested: v.Requested / bucket.MilliPerToken,
		Remaining: bucket.WholeTokens(v.Remaining), Reset: msDuration(v.ResetMs), Exceeded: v.Exceeded}
	switch {
	case !v.Exceeded:
	case v.RetryMs < 0:
		// Only a shard of a sharded bucket can be too small for a request
		// (a whole bucket's burst covers any valid one): another shard,
		// tried next time, may serve it.
		ls.RetryAfter = ls.Limit.Period
	default:
		ls.RetryAfter = msDuration(v.RetryMs)
	}
	return ls
}

func (bp bucketPlan) states(vs []engine.View) []LimitState {
	out := make([]LimitState, len(vs))
	for i, v := range vs {
		out[i] = bp.state(v)
	}
	return out
}
