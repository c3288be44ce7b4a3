package limiter

import (
	"time"

	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/internal/keys"
)

// bucketPlan is the engine's plan of one bucket write with the limits as
// the caller knows them, for the answers (LimitState carries a Limit).
type bucketPlan struct {
	*engine.Plan
	limits []Limit
	parent bool // a cascade parent's bucket
	// skipped are the shadow limits the write skips (they would have
	// refused): the lease's Adjust and Rollback leave them alone too.
	skipped []string
}

// newPlan returns the plan to charge consume (tokens) from an (entity,
// resource) bucket under limits, which must be valid (Validate loaded
// every quota's time zone).
func (l *Limiter) newPlan(entity, resource string, limits []Limit, consume map[string]int64) bucketPlan {
	el := make([]engine.Limit, 0, len(limits))
	for _, x := range limits {
		e, _ := x.engineLimit()
		el = append(el, e)
	}
	ref := keys.Bucket{Namespace: l.cfg.namespace, Entity: entity, Resource: resource}
	return bucketPlan{Plan: engine.NewPlan(ref, el, consume), limits: limits}
}

// skipping returns bp charging nothing of the limits called names, and
// requiring nothing of them (engine.Plan.Skipping); bp itself when names
// is empty.
func (bp bucketPlan) skipping(names []string) bucketPlan {
	if len(names) > 0 {
		bp.Plan, bp.skipped = bp.Plan.Skipping(names), names
	}
	return bp
}

// limit returns the limit called name.
func (bp bucketPlan) limit(name string) Limit {
	for _, x := range bp.limits {
		if x.Name == name {
			return x
		}
	}
	return Limit{Name: name}
}

// rateLimited builds the refusal's error.
func (bp bucketPlan) rateLimited(rf *engine.Refusal) *RateLimitedError {
	e := &RateLimitedError{Entity: bp.Ref.Entity, Resource: bp.Ref.Resource, Limits: bp.states(rf.Views()), Parent: bp.parent, Local: rf.Local}
	for _, ls := range e.Limits {
		if !ls.Limit.Shadow {
			e.RetryAfter = max(e.RetryAfter, ls.RetryAfter)
		}
	}
	if e.RetryAfter <= 0 {
		// Refused after losing every race, with the tokens there when last
		// seen: another try may well succeed.
		e.RetryAfter = time.Millisecond
	}
	return e
}

// part is the lease part of a charged bucket. Its quotas settle in the
// windows the charge wrote (engine.Plan.At).
func (bp bucketPlan) part(m *engine.Charge, now int64) leasePart {
	bp.Plan = bp.Plan.Settling(m.Img, m.At)
	return leasePart{p: bp, shard: m.Shard, n: m.N, img: m.Img, at: now}
}
