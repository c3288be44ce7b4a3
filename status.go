package limiter

import (
	"context"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Available is one limit's balance across every shard of a bucket.
type Available struct {
	Limit Limit
	// Tokens is the balance now, summed over shards and rounded down; it is
	// negative when adjustments put the bucket in debt.
	Tokens int64
}

// Available returns, per limit in name order, the tokens an (entity,
// resource) bucket holds now across all its shards. resource "" means
// DefaultResource. limits are the caller's, as in Request (none: the
// limiter's default limits); stored limits override them by name. A bucket
// never written is full. It reads shard 0 (for the shard count) and then
// the other shards in one batch; it writes nothing.
func (l *Limiter) Available(ctx context.Context, entity, resource string, limits []Limit) ([]Available, error) {
	if resource == "" {
		resource = DefaultResource
	}
	if err := checkEntity("entity", entity); err != nil {
		return nil, err
	}
	if err := checkResource("resource", resource); err != nil {
		return nil, err
	}
	if err := checkLimits("limits", limits); err != nil {
		return nil, err
	}
	tr := &trace{ev: Event{Op: "status", Entity: entity, Resource: resource}}
	_, limits, err := l.limitsFor(ctx, tr, entity, resource, limits)
	if err != nil {
		return nil, l.storeErr("status", err)
	}
	if len(limits) == 0 {
		return nil, invalid("limits", "no limits apply: none given, no default limits (WithDefaultLimits) and none stored for the entity or resource")
	}
	p := newPlan(keys.Bucket{Namespace: l.cfg.namespace, Entity: entity, Resource: resource}, limits, nil)
	out, err := l.st.Get(ctx, store.GetInput{Key: p.ref.Key(), ConsistentRead: true})
	if err != nil {
		return nil, l.storeErr("status", err)
	}
	items := []store.Item{out.Item}
	n := int64(1)
	if out.Item != nil {
		if c, ok := out.Item.Int(attrShardCount); ok && c > 1 {
			n = c
		}
	}
	for first := int64(1); first < n; first += 100 {
		var ks []store.Key
		for s := first; s < n && s < first+100; s++ {
			ks = append(ks, p.ref.WithShard(int(s)).Key())
		}
		bo, err := l.st.BatchGet(ctx, store.BatchGetInput{Keys: ks, ConsistentRead: true})
		if err != nil {
			return nil, l.storeErr("status", err)
		}
		items = append(items, bo.Items...)
	}
	now := l.nowMs()
	res := make([]Available, 0, len(limits))
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden {
			continue
		}
		var sum int64
		for shard, it := range items {
			im, err := decodeImage(it)
			if err != nil {
				return nil, err
			}
			if im == nil {
				if shard == 0 {
					sum += s.orig.PerShard(n).Burst // a bucket never written is full
				}
				continue // a shard not created yet holds nothing
			}
			st, _ := im.projected(s, max(n, im.shardCount), now)
			sum += st.Tokens
		}
		res = append(res, Available{Limit: s.limit, Tokens: bucket.WholeTokens(sum)})
	}
	return res, nil
}
