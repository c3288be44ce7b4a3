package limiter

import (
	"context"
	"errors"
	"log/slog"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Request asks for tokens from one (entity, resource) bucket.
type Request struct {
	// Entity is who is limited, such as an API key.
	Entity string
	// Resource is what is limited, such as a model name; it may contain
	// '/'. Empty means DefaultResource (plain per-key limiting).
	Resource string
	// Limits are the caller's limits; empty means the limiter's default
	// limits (WithDefaultLimits). Limits stored for the entity or the
	// resource override them by name, and add the names they define (see
	// Scope); a name nothing stored defines keeps the caller's limit.
	Limits []Limit
	// Consume maps limit names to the tokens to take (each at least 1).
	// Every name must be one of the limits that apply (the caller's or
	// stored ones); limits not named take nothing but must not be in debt.
	Consume map[string]int64
	// Policy overrides the limiter's unavailability policy for this call.
	Policy Policy
}

// Acquire takes the requested tokens from every limit of the bucket, all
// or none, in one conditional write on the hot path. With cascade on for
// the entity, it also charges the parent's bucket, all or none across both.
//
// It returns a *RateLimitedError when a limit lacks tokens (nothing is
// charged), a *ValidationError for bad input (checked before any I/O), and
// an *UnavailableError when the store fails and the policy is fail-closed.
// Under fail-open, a store failure returns a lease whose FailedOpen is true.
func (l *Limiter) Acquire(ctx context.Context, req Request) (*Lease, error) {
	tr := &trace{ev: Event{Op: "acquire", Entity: req.Entity, Resource: req.Resource}, start: l.callStart()}
	lease, err := l.acquire(ctx, tr, req)
	if err != nil && storeDown(err) {
		policy := req.Policy
		if policy == PolicyDefault {
			policy = l.cfg.policy
		}
		l.cfg.logger.Warn("limiter: store unavailable", "entity", req.Entity, "resource", req.Resource, "err", err)
		if policy == FailOpen {
			tr.ev.Path = PathFailOpen
			lease, err = &Lease{l: l, failedOpen: true}, nil
		} else {
			err = &UnavailableError{Op: "acquire", Err: err}
		}
	}
	l.observe(tr, err, Admitted)
	return lease, err
}

// storeDown reports whether err means the store could not answer
// (unavailable, or throttled past its retries): only then does the
// unavailability policy apply. Anything else (a rate limit, bad input, a
// missing table or permission, an unknown schema, a cancelled context) is
// returned as it is and never failed open.
func storeDown(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrThrottled)
}

func (l *Limiter) observe(tr *trace, err error, ok Outcome) {
	if l.cfg.observer == nil && !l.cfg.logger.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	tr.ev.Err = err
	switch {
	case err == nil:
		tr.ev.Outcome = ok
	case errors.Is(err, ErrRateLimited):
		tr.ev.Outcome = Rejected
	case errors.Is(err, ErrInvalid):
		tr.ev.Outcome = Invalid
	default:
		tr.ev.Outcome = Unavailable
	}
	if l.cfg.logger.Enabled(context.Background(), slog.LevelDebug) {
		l.cfg.logger.Debug("limiter: "+tr.ev.Op, "entity", tr.ev.Entity, "resource", tr.ev.Resource,
			"outcome", tr.ev.Outcome.String(), "path", tr.ev.Path.String(), "round_trips", tr.ev.RoundTrips,
			"wcu", tr.ev.WriteUnits, "rcu", tr.ev.ReadUnits, "err", err)
	}
	if l.cfg.observer != nil {
		if !tr.start.IsZero() {
			tr.ev.Duration = l.cfg.clock.Now().Sub(tr.start)
		}
		l.cfg.observer.Observe(tr.ev)
	}
}

func (l *Limiter) acquire(ctx context.Context, tr *trace, req Request) (*Lease, error) {
	s, err := l.config(ctx, tr, req)
	if err != nil {
		return nil, err
	}
	child := newPlan(keys.Bucket{Namespace: l.cfg.namespace, Entity: req.Entity, Resource: s.resource}, s.limits, req.Consume)
	if !s.entity.Cascade {
		shard, n, img, err := l.chargeBucket(ctx, tr, child)
		if err != nil {
			return nil, err
		}
		return &Lease{l: l, parts: []leasePart{{p: child, shard: shard, n: n, states: child.statesAfter(img, n, l.nowMs(), false)}}}, nil
	}
	parent := newPlan(keys.Bucket{Namespace: l.cfg.namespace, Entity: s.entity.Parent, Resource: s.resource}, s.parent, req.Consume)
	return l.cascade(ctx, tr, child, parent)
}
