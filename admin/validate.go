package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// invalid is the error of input that breaks a rule: a
// *limiter.ValidationError, as the limiter's own.
func invalid(field, format string, args ...any) error {
	return &limiter.ValidationError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// begin checks what every call needs: an Admin made by New and a context.
func (a *Admin) begin(ctx context.Context) error {
	if a == nil || a.st == nil {
		return invalid("Admin", "must be made with New")
	}
	if ctx == nil {
		return invalid("ctx", "must not be nil (use context.Background())")
	}
	return nil
}

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

// storeErr turns a store error into the caller's: when ctx is done, the
// context's error (joined with err, which says whether a write may have
// applied: store.OutcomeUnknown), never a *limiter.UnavailableError; a
// store failure (unavailable, or throttled past its retries) wrapped in a
// *limiter.UnavailableError; other errors as they are.
func storeErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return err
		}
		return errors.Join(cerr, err)
	}
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrThrottled) {
		return &limiter.UnavailableError{Op: op, Err: err}
	}
	return err
}

// limitsOf decodes a stored limits item; ok is false for no item.
func limitsOf(it store.Item) ([]limiter.Limit, bool, error) {
	return items.DecodeLimits(it, limiter.Limit.Validate)
}

// checkLimits applies the rules of a request's limits to a stored scope's:
// at most 16, each valid, no name twice.
func checkLimits(ls []limiter.Limit) error {
	if len(ls) > 16 {
		return invalid("limits", "%d limits; at most 16", len(ls))
	}
	seen := make(map[string]bool, len(ls))
	for _, l := range ls {
		if err := l.Validate(); err != nil {
			return err
		}
		if seen[l.Name] {
			return invalid("limits", "limit %q appears twice", l.Name)
		}
		seen[l.Name] = true
	}
	return nil
}
