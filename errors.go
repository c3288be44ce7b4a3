package limiter

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shardlimit/limiter/internal/items"
)

// Sentinel errors. Test with errors.Is; the typed errors carry details.
var (
	// ErrRateLimited: a limit had too few tokens; *RateLimitedError says which and for how long.
	ErrRateLimited = errors.New("limiter: rate limited")
	// ErrInvalid: a request or configuration broke a rule; *ValidationError names the field.
	ErrInvalid = errors.New("limiter: invalid input")
	// ErrUnavailable: the store failed and the policy is fail-closed; *UnavailableError wraps the cause.
	ErrUnavailable = errors.New("limiter: store unavailable")
	// ErrLeaseEnded: a lease was used after Commit or Rollback.
	ErrLeaseEnded = errors.New("limiter: lease already ended")
	// ErrSchemaVersion: the table was written by a limiter with a layout this one does not know.
	ErrSchemaVersion = items.ErrSchemaVersion
	// ErrBreakerOpen: the cause of an *UnavailableError answered without a
	// store call because the store failed repeatedly just before (see
	// WithBreaker).
	ErrBreakerOpen = errors.New("limiter: circuit breaker open after repeated store failures")
	// ErrDisabled: an acquire refused outright, without a write, because
	// an operator set its scope's mode to refuse (admin.ModeRefuse). It is
	// not a rate limit: there is no retry-after, and retrying fails until
	// the mode changes (the limiter sees a change within its cache TTL).
	ErrDisabled = errors.New("limiter: disabled")
)

// RateLimitedError is returned by Acquire when a limit lacks the tokens
// asked for. Nothing was charged.
type RateLimitedError struct {
	// Entity is the entity of the bucket that refused: the request's, or
	// its cascade parent's when Parent is true.
	Entity string
	// Resource is the resource of the bucket that refused: the request's
	// (DefaultResource when it named none), or the one of Request.Also
	// that refused.
	Resource string
	// RetryAfter is the largest RetryAfter of the exceeded limits that
	// enforce (a shadow limit never refuses: its wait, a quota's next
	// window, is left out): waiting that long and retrying succeeds if no
	// one else consumes meanwhile.
	RetryAfter time.Duration
	// Limits has one entry per limit of the refusing bucket, in name
	// order: what applied, what it holds, and how long until the request
	// fits (RetryAfter) and until it is full (Reset).
	Limits []LimitState
	// Parent is true when the limits are the cascade parent's.
	Parent bool
	// Local is true when the refusal was answered without a store call,
	// from the limiter's last item of the bucket (at most a second
	// old; see WithLocalRefusals). Its RetryAfter then assumes no one
	// consumed since that item was read: other processes' consumption can
	// make the real wait longer.
	Local bool
}

// Error returns the error's message.
func (e *RateLimitedError) Error() string {
	if e == nil {
		return ErrRateLimited.Error()
	}
	var b strings.Builder
	who := e.Entity
	if e.Parent {
		who = "parent " + who
	}
	fmt.Fprintf(&b, "limiter: rate limited: %s on %s, retry after %v (", who, e.Resource, e.RetryAfter)
	first := true
	for _, s := range e.Limits {
		if !s.Exceeded {
			continue
		}
		if !first {
			b.WriteString("; ")
		}
		first = false
		fmt.Fprintf(&b, "%s: requested %d, remaining %d", s.Limit.Name, s.Requested, s.Remaining)
	}
	b.WriteString(")")
	return b.String()
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// ValidationError is returned, before any store call, for input that breaks
// a rule. Nothing was changed.
type ValidationError struct {
	// Field names the input, such as "Request.Entity" or "Limit[rpm].Refill".
	Field string
	// Rule says what the field must be.
	Rule string
}

// Error returns the error's message.
func (e *ValidationError) Error() string {
	if e == nil {
		return ErrInvalid.Error()
	}
	return "limiter: invalid " + e.Field + ": " + e.Rule
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// UnavailableError is returned when the store failed (throttled past its
// retries, a server error, a timeout) and the policy is fail-closed.
//
// It is also what a cascade answers when one side refused and the other
// side's charge may stand (its write timed out, or its undo failed): an
// unknown outcome, never a refusal as well. errors.Is(err, ErrRateLimited)
// is false for it, store.OutcomeUnknown(err) true, and Refusal keeps what
// the refusal said. Such an answer is never failed open: the store did
// refuse.
type UnavailableError struct {
	// Op is what the limiter was doing, such as "acquire" or "adjust".
	Op string
	// Err is the store's error; store.OutcomeUnknown(Err) tells whether a
	// write may have applied.
	Err error
	// Refusal, when not nil, is the refusal of one side of a cascade whose
	// other side may have been charged: which bucket refused and how long
	// until the request fits (RetryAfter). It is not in the error's chain.
	Refusal *RateLimitedError
}

// Error returns the error's message.
func (e *UnavailableError) Error() string {
	if e == nil {
		return ErrUnavailable.Error()
	}
	s := "limiter: store unavailable during " + e.Op
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Refusal != nil {
		s += "; and refused: " + e.Refusal.Error()
	}
	return s
}

// Unwrap returns the store's error.
func (e *UnavailableError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
