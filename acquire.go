package limiter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Request asks for tokens from an (entity, resource) bucket, or from
// several resources of the entity at once (Also).
type Request struct {
	// Entity is who is limited, such as an API key.
	Entity string
	// Resource is what is limited, such as a model name; it may contain
	// '/'. Empty means DefaultResource (plain per-key limiting).
	Resource string
	// Also are more resources of the entity charged by the same acquire,
	// the same Consume on each (say the model and "all-models"): all of
	// them or none, their writes made together in one round trip. Each
	// resource's limits are resolved as Resource's are (the caller's
	// Limits, overridden by what is stored for the resource), and Consume
	// must fit each. With Resource, at most 16 resources, each named once.
	Also []string
	// Limits are the caller's limits; empty means the limiter's default
	// limits (WithDefaultLimits). Limits stored for the entity or the
	// resource override them by name, and add the names they define (see
	// Scope); a name nothing stored defines keeps the caller's limit.
	// The lease Acquire returns may keep the slice (Lease.Limits reads
	// it): do not change its elements while the lease is in use; a new
	// slice for the next request is always fine.
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
// the entity, it also charges the parent's bucket, and with Request.Also
// the bucket of each further resource (and its parent's): all or none
// across every bucket, their writes made together in one round trip, a
// bucket charged while another refused refunded before the answer.
//
// An acquire in a scope an operator disabled (see admin.Mode) makes no
// write: in admit mode it returns a lease that charged nothing (Adjust and
// Rollback do nothing), in refuse mode an error matching ErrDisabled
// (never a *RateLimitedError: it has no retry-after, as waiting does not
// help). The configuration is read, and bad input refused, all the same.
//
// It returns a *RateLimitedError when a limit lacks tokens (nothing is
// charged), a *ValidationError for bad input or a nil ctx (checked before
// any I/O), the context's error when ctx is done (never a lease), and an
// *UnavailableError when the store fails and the policy is fail-closed.
// Under fail-open, a store failure returns a lease whose FailedOpen is
// true. An UnavailableError whose outcome is unknown
// (store.OutcomeUnknown) may have charged the bucket; it is never also a
// refusal (see UnavailableError.Refusal).
func (l *Limiter) Acquire(ctx context.Context, req Request) (*Lease, error) {
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	trv := l.newTrace("acquire", req.Entity, req.Resource)
	tr := &trv
	lease, err := l.acquire(ctx, tr, req)
	switch {
	case err == nil, errors.Is(err, ErrRateLimited), errors.Is(err, ErrDisabled), refusedUnknown(err):
		// A refusal is never failed open, also when it comes with an
		// unknown outcome (a cascade whose other side may be charged).
	case storeDown(err):
		lease, err = l.unavailable(ctx, tr, req.Policy, err)
	}
	l.observe(tr, err, Admitted)
	return lease, err
}

// refusedUnknown reports whether err is a cascade's refusal whose other
// side may have been charged (UnavailableError.Refusal): the limiter's
// answer already, and not failed open.
func refusedUnknown(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u) && u.Refusal != nil
}

// unavailable applies the unavailability policy to a store failure.
func (l *Limiter) unavailable(ctx context.Context, tr *trace, p Policy, err error) (*Lease, error) {
	if derr := ctxDone(ctx, err); derr != nil {
		// The caller gave up: its context's error, never a lease. A write
		// in flight may have applied: the store's error says so.
		return nil, derr
	}
	if p == PolicyDefault {
		p = l.cfg.policy
	}
	if !tr.ev.BreakerOpen {
		l.cfg.logger.Warn("limiter: store unavailable", "entity", tr.ev.Entity, "resource", tr.ev.Resource, "err", err)
	}
	if p == FailOpen {
		tr.ev.Path, tr.cause = PathFailOpen, err
		return &Lease{l: l, failedOpen: true}, nil
	}
	return nil, &UnavailableError{Op: tr.ev.Op, Err: err}
}

func (l *Limiter) acquire(ctx context.Context, tr *trace, req Request) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resource := req.Resource
	if resource == "" {
		resource = DefaultResource
	}
	if err := checkRequest(req, resource); err != nil {
		return nil, err // bad input is reported as such, breaker or not
	}
	if !l.cfg.noBreaker && !l.breaker.allow(l.nowMs) {
		tr.ev.BreakerOpen = true
		return nil, &store.UnavailableError{Op: "acquire", Err: ErrBreakerOpen}
	}
	s, err := l.config(ctx, tr, req)
	var lease *Lease
	switch {
	case err != nil:
	default:
		lease, err = l.modes(ctx, tr, req, s)
	}
	if !l.cfg.noBreaker {
		// The jitter is drawn on every call, used or not: the limiter's
		// random draws stay the same sequence whatever the breaker does.
		// The clock is read only when the breaker changes.
		if jitter := l.rng.Float64(); l.breaker.changes(err) {
			l.breaker.record(err, l.nowMs(), jitter)
		}
	}
	return lease, err
}

// charge runs the write engine for an acquire whose configuration is
// resolved. A refusal by shadow limits alone is no refusal: the acquire is
// charged again skipping them (each is charged only when it has the
// tokens, as if it enforced), and Event.WouldRefuse names them. Each try
// skips at least one more limit, so there are at most as many tries as
// limits.
//
// So is such a refusal whose other buckets' outcome is unknown (a cascade
// or several resources whose compensation failed, see
// UnavailableError.Refusal): without the shadow limits the acquire would
// not have been refused, so it is not refused for them either. The
// charge that may stand is reported all the same: in Event.Err when the
// next try is admitted (the caller may have paid twice on that bucket, as
// a refused acquire's stray charge costs it tokens), and as an
// UnavailableError whose outcome is unknown when it is not.
func (l *Limiter) charge(ctx context.Context, tr *trace, req Request, s settings) (*Lease, error) {
	var stray error // the failed compensations of earlier tries: charges that may stand
	for {
		lease, err := l.chargeOnce(ctx, tr, req, s)
		var rl *RateLimitedError
		var u *UnavailableError
		switch {
		case errors.As(err, &rl):
		case errors.As(err, &u) && u.Refusal != nil:
			rl = u.Refusal
		case err == nil && stray != nil:
			tr.cause = stray
			return lease, nil
		case err != nil && stray != nil:
			return nil, &UnavailableError{Op: "acquire", Err: errors.Join(err, stray)}
		default:
			return lease, err
		}
		if u != nil {
			stray = errors.Join(stray, u.Err)
		}
		var names []string
		for _, ls := range rl.Limits {
			if ls.Exceeded && !ls.Limit.Shadow {
				return nil, refusedWith(err, rl, stray) // an enforcing limit refused
			}
			if ls.Exceeded {
				names = append(names, ls.Limit.Name)
			}
		}
		i := slices.IndexFunc(s.buckets, func(b resourceLimits) bool { return b.resource == rl.Resource })
		if len(names) == 0 || i < 0 {
			return nil, refusedWith(err, rl, stray) // refused after losing races: not a limit's doing
		}
		if cerr := ctx.Err(); cerr != nil {
			if stray != nil {
				return nil, refusedWith(err, rl, stray) // the caller gave up: no new try
			}
			return nil, cerr
		}
		b := &s.buckets[i]
		prefix := ""
		if rl.Parent {
			b.skipParent, prefix = append(b.skipParent, names...), "parent:"
		} else {
			b.skip = append(b.skip, names...)
		}
		if b.resource != cmp.Or(req.Resource, DefaultResource) {
			// A resource of Request.Also (the first one charged when an
			// admit mode left the request's own resource out).
			prefix += b.resource + "/"
		}
		for _, n := range names {
			tr.ev.WouldRefuse = append(tr.ev.WouldRefuse, prefix+n)
		}
	}
}

// refusedWith returns the answer to a refusal err (rl) after tries whose
// compensations failed (stray, nil for none): the refusal, or an
// unavailability whose outcome is unknown carrying it.
func refusedWith(err error, rl *RateLimitedError, stray error) error {
	if stray == nil {
		return err
	}
	return &UnavailableError{Op: "acquire", Err: stray, Refusal: rl}
}

// modes applies the modes of the scopes of the resources charged: a
// refuse mode on any of them refuses the acquire without a write
// (ErrDisabled); a resource in admit mode is left out of the charge, and
// when every one is, the acquire is admitted without a write; a resource
// in shadow mode is charged with all its limits shadow (config made
// them so). Event.Mode is "refuse", "admit" (nothing charged), "shadow"
// (a resource charged is in shadow mode) or ""; Event.LeftOut names the
// resources in admit mode.
func (l *Limiter) modes(ctx context.Context, tr *trace, req Request, s settings) (*Lease, error) {
	charged := make([]resourceLimits, 0, len(s.buckets))
	for _, b := range s.buckets {
		switch b.mode {
		case items.ModeRefuse:
			tr.ev.Mode = b.mode
			return nil, fmt.Errorf("%w: entity %q on resource %q is refused by the mode of %s; no retry helps until an operator changes it",
				ErrDisabled, req.Entity, b.resource, b.modeOf)
		case items.ModeAdmit:
			tr.ev.LeftOut = append(tr.ev.LeftOut, b.resource)
			continue
		case items.ModeShadow:
			tr.ev.Mode = b.mode
		}
		charged = append(charged, b)
	}
	if len(charged) == 0 {
		tr.ev.Mode = items.ModeAdmit
		return &Lease{l: l, bypass: true}, nil
	}
	s.buckets = charged
	return l.charge(ctx, tr, req, s)
}

// chargeOnce is one try of charge.
func (l *Limiter) chargeOnce(ctx context.Context, tr *trace, req Request, s settings) (*Lease, error) {
	if s.entity.Cascade || len(s.buckets) > 1 {
		plans := make([]bucketPlan, 0, 2*len(s.buckets))
		for _, b := range s.buckets {
			plans = append(plans, l.newPlan(req.Entity, b.resource, b.limits, req.Consume).skipping(b.skip))
			if s.entity.Cascade {
				parent := l.newPlan(s.entity.Parent, b.resource, b.parent, req.Consume).skipping(b.skipParent)
				parent.parent = true
				plans = append(plans, parent)
			}
		}
		return l.cascade(ctx, tr, plans)
	}
	b := s.buckets[0]
	child := l.newPlan(req.Entity, b.resource, b.limits, req.Consume).skipping(b.skip)
	if l.pools != nil && l.cfg.reserve.covers(req.Consume) && !child.ChargesQuota() && !child.ChargesCap() && !slices.ContainsFunc(b.limits, func(x Limit) bool { return x.Shadow }) {
		if lease, err, done := l.reserved(ctx, tr, child); done {
			return lease, err
		}
	}
	m := engine.NewCharge(l.mem, child.Plan, l.rng, l.cfg.engine)
	now := l.nowMs()
	step, now := l.drive(ctx, tr, now, m.Start(now), m.Feed)
	if l.pools != nil {
		switch {
		case step.Done:
			l.pools.Granted(child.Plan, now)
		case step.Refused != nil:
			l.pools.Refused(child.Ref, now)
		}
	}
	var part leasePart
	if step.Done {
		part = child.part(m, now)
	}
	switch {
	case step.Done:
		return oneLease(l, part), nil
	case step.Refused != nil:
		return nil, child.rateLimited(step.Refused)
	}
	return nil, step.Err
}

// drive runs a machine: it makes each call a step asks for and feeds the
// result back, until the machine answers. This is the I/O loop; every
// decision is the machine's. now is the clock (Unix ms) the first step
// was made at; drive returns the one the answer was made at. The clock is
// read once after each call, not again until the next: nothing between
// waits.
func (l *Limiter) drive(ctx context.Context, tr *trace, now int64, step engine.Step, feed func(engine.Result, int64) engine.Step) (engine.Step, int64) {
	for step.Call != nil {
		tr.path(step.Path)
		r := l.call(ctx, tr, step.Call, now)
		if step.Path == engine.PathDouble && r.Err == nil {
			l.doubled(tr, step.Call.Update.Key)
		}
		now = l.nowMs()
		step = feed(r, now)
	}
	tr.path(step.Path)
	return step, now
}

// call makes one store call, sent at Unix ms sent. The read of an acquire
// already decided (Call.Decided) runs on a context of its own, and not at
// all once the caller has gone: its charge landed, and its caller gets
// the lease.
func (l *Limiter) call(ctx context.Context, tr *trace, c *engine.Call, sent int64) engine.Result {
	r := engine.Result{Sent: sent}
	if c.Decided {
		if r.Err = ctx.Err(); r.Err != nil {
			return r
		}
		var cancel context.CancelFunc
		ctx, cancel = l.detached(ctx)
		defer cancel()
	}
	switch {
	case c.Update != nil:
		r.Write, r.Err = l.st.Update(ctx, *c.Update)
		tr.add(r.Write.Consumed, r.Err)
	case c.Put != nil:
		r.Write, r.Err = l.st.Put(ctx, *c.Put)
		tr.add(r.Write.Consumed, r.Err)
	case c.Query != nil:
		r.Query, r.Err = l.st.Query(ctx, *c.Query)
		tr.add(r.Query.Consumed, r.Err)
	case c.BatchGet != nil:
		r.Batch, r.Err = l.st.BatchGet(ctx, *c.BatchGet)
		tr.add(r.Batch.Consumed, r.Err)
	case c.Transact != nil:
		r.Write, r.Err = l.st.TransactWrite(ctx, *c.Transact)
		tr.add(r.Write.Consumed, r.Err)
	}
	return r
}

func (l *Limiter) doubled(tr *trace, k store.Key) {
	tr.ev.ShardDoublings++
	if b, ok := keys.ParseBucketPK(k.PK); ok {
		l.cfg.logger.Info("limiter: doubled shard count", "entity", b.Entity, "resource", b.Resource)
	}
}
