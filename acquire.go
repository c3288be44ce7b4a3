package limiter

import (
	"context"
	"errors"
	"log/slog"
	"sort"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Request asks for tokens from one (entity, resource) bucket.
type Request struct {
	// Entity is who is limited, such as an API key.
	Entity string
	// Resource is what is limited, such as a model name; it may contain '/'.
	Resource string
	// Limits are the caller's limits. Limits stored for the entity or the
	// resource override them (see Scope); with none stored, these apply.
	Limits []Limit
	// Consume maps limit names to the tokens to take (each at least 1).
	// Limits not named take nothing but must not be in debt.
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
	if err := checkEntity("Request.Entity", req.Entity); err != nil {
		return nil, err
	}
	if err := checkResource("Request.Resource", req.Resource); err != nil {
		return nil, err
	}
	if err := checkLimits("Request.Limits", req.Limits); err != nil {
		return nil, err
	}
	if req.Policy > FailOpen {
		return nil, invalid("Request.Policy", "unknown policy %d", req.Policy)
	}
	if len(req.Consume) == 0 {
		return nil, invalid("Request.Consume", "must name at least one limit")
	}
	for name, n := range req.Consume {
		if n < 1 || n > MaxTokens {
			return nil, invalid("Request.Consume["+name+"]", "%d must be between 1 and %d tokens", n, MaxTokens)
		}
	}
	if len(req.Limits) > 0 {
		// Stored limits may override these, but a request the caller's own
		// limits cannot serve is a bug worth reporting before any I/O.
		if err := checkConsume(req.Limits, req.Consume); err != nil {
			return nil, err
		}
	}
	r, err := l.resolve(ctx, tr, req.Entity, req.Resource)
	if err != nil {
		return nil, err
	}
	limits := r.limits
	if limits == nil {
		limits = req.Limits
	}
	if r.limits != nil || len(req.Limits) == 0 {
		// Stored limits replace the caller's (checked above), or there are
		// none at all: check the request against what applies.
		if err := checkConsume(limits, req.Consume); err != nil {
			return nil, err
		}
	}
	child := newPlan(keys.Bucket{Namespace: l.cfg.namespace, Entity: req.Entity, Resource: req.Resource}, limits, req.Consume)
	if !r.entity.Cascade {
		shard, n, err := l.chargeBucket(ctx, tr, child)
		if err != nil {
			return nil, err
		}
		return &Lease{l: l, parts: []leasePart{{p: child, shard: shard, n: n}}}, nil
	}
	pr, err := l.resolve(ctx, tr, r.entity.Parent, req.Resource)
	if err != nil {
		return nil, err
	}
	plimits := pr.limits
	if plimits == nil {
		plimits = req.Limits
	}
	parent := newPlan(keys.Bucket{Namespace: l.cfg.namespace, Entity: r.entity.Parent, Resource: req.Resource}, plimits, req.Consume)
	for i := range parent.specs { // the parent cannot serve more than its burst
		if s := &parent.specs[i]; s.amount > s.orig.Burst {
			return nil, invalid("Request.Consume["+s.limit.Name+"]", "%d tokens exceeds the burst %d of the parent's limit",
				s.amount/bucket.MilliPerToken, s.limit.burst())
		}
	}
	return l.cascade(ctx, tr, child, parent)
}

func checkConsume(limits []Limit, consume map[string]int64) error {
	if len(limits) == 0 {
		return invalid("Request.Limits", "no limits given and none stored for this entity or resource")
	}
	names := make([]string, 0, len(consume))
	for name := range consume {
		names = append(names, name)
	}
	sort.Strings(names) // report the first bad name deterministically
	for _, name := range names {
		found := false
		for _, x := range limits {
			if x.Name == name {
				found = true
				if consume[name] > x.burst() {
					return invalid("Request.Consume["+name+"]", "%d tokens exceeds the burst %d: it could never be admitted", consume[name], x.burst())
				}
			}
		}
		if !found {
			return invalid("Request.Consume["+name+"]", "no limit named %q is defined", name)
		}
	}
	return nil
}
