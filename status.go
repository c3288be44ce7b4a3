package limiter

import (
	"context"
	"slices"
	"strings"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Status returns, per limit in name order, the state of an (entity,
// resource) bucket now: Remaining is the balance summed over every shard
// (exact, unlike the estimate a Lease carries), Reset the longest time any
// shard needs to be full. resource "" means DefaultResource. limits are
// the caller's, as in Request (none: the limiter's default limits); stored
// limits override them by name. A bucket never written is full. It reads
// shard 0 (for the shard count) and then the other shards in one batch;
// it writes nothing. The observer sees it as an Event whose Op is
// "status".
func (l *Limiter) Status(ctx context.Context, entity, resource string, limits []Limit) ([]LimitState, error) {
	if err := l.usable(ctx); err != nil {
		return nil, err
	}
	trv := l.newTrace("status", entity, resource)
	tr := &trv
	res, err := l.status(ctx, tr, entity, resource, limits)
	l.observe(tr, err, Succeeded)
	return res, err
}

func (l *Limiter) status(ctx context.Context, tr *trace, entity, resource string, limits []Limit) ([]LimitState, error) {
	if resource == "" {
		resource = DefaultResource
	}
	tr.ev.Resource = resource
	if err := checkEntity("entity", entity); err != nil {
		return nil, err
	}
	if err := checkResource("resource", resource); err != nil {
		return nil, err
	}
	if err := checkLimits("limits", limits); err != nil {
		return nil, err
	}
	c, err := l.limitsFor(ctx, tr, entity, resource, limits)
	if err != nil {
		return nil, l.storeErr(ctx, "status", err)
	}
	limits = c.limits
	if len(limits) == 0 {
		return nil, invalid("limits", "no limits apply: none given, no default limits (WithDefaultLimits) and none stored for the entity or resource")
	}
	p := l.newPlan(entity, resource, limits, nil)
	out, err := l.st.Get(ctx, store.GetInput{Key: p.Ref.Key(), ConsistentRead: true})
	tr.add(out.Consumed, err)
	if err != nil {
		return nil, l.storeErr(ctx, "status", err)
	}
	items := []store.Item{out.Item}
	n := keys.ShardCount(out.Item)
	for first := int64(1); first < n; first += 100 {
		var ks []store.Key
		for s := first; s < n && s < first+100; s++ {
			ks = append(ks, p.Ref.WithShard(int(s)).Key())
		}
		bo, err := l.st.BatchGet(ctx, store.BatchGetInput{Keys: ks, ConsistentRead: true})
		tr.add(bo.Consumed, err)
		if err != nil {
			return nil, l.storeErr(ctx, "status", err)
		}
		items = append(items, bo.Items...)
	}
	images := make([]*engine.Image, len(items))
	for i, it := range items {
		if images[i], err = engine.Decode(it); err != nil {
			return nil, err
		}
	}
	now := l.nowMs()
	res := make([]LimitState, 0, len(limits))
	for _, x := range sortedLimits(limits) {
		sum, reset, _ := p.Total(x.Name, images, n, now)
		res = append(res, LimitState{Resource: resource, Limit: x, Shards: n, Remaining: bucket.WholeTokens(sum), Reset: msDuration(reset)})
	}
	return res, nil
}

// sortedLimits returns limits in name order.
func sortedLimits(limits []Limit) []Limit {
	out := append([]Limit(nil), limits...)
	slices.SortFunc(out, func(a, b Limit) int { return strings.Compare(a.Name, b.Name) })
	return out
}
