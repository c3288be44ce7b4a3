package admin

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Operator reads: what a namespace holds. The store has no Scan, so the
// listings go through the GSI3 entries that entity and stored-limits items
// carry (see internal/keys): one Query of the namespace's configuration
// partition, then strongly consistent batch reads of the items. The index
// is eventually consistent: an item created a moment ago may be missing
// from a listing (typically for well under a second), one deleted a moment
// ago is dropped by the batch read.

// ListEntities returns the entities of the namespace whose id begins with
// prefix ("" for all), in id order, at most limit of them (0: no cap).
// Entities are those written with PutEntity (an entity that only has
// buckets or stored limits has no entity item).
func (a *Admin) ListEntities(ctx context.Context, prefix string, limit int) ([]Entity, error) {
	if err := a.begin(ctx); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, invalid("limit", "%d must not be negative", limit)
	}
	if prefix != "" && !keys.ValidIdent(prefix, 256, false, ":@") {
		return nil, invalid("prefix", "%q must be empty or the start of an entity id (%s)", prefix, keys.RuleEntity)
	}
	ids, got, err := a.listConfig(ctx, keys.EntityIndexSK(prefix), limit)
	if err != nil {
		return nil, err
	}
	var res []Entity
	for i, it := range got {
		if it != nil {
			res = append(res, Entity(items.DecodeEntity(ids[i].entity, it)))
		}
	}
	return res, nil
}

// StoredLimits is the limits and the mode stored for one scope.
type StoredLimits struct {
	// Scope is the scope the limits and mode are stored for.
	Scope Scope
	// Limits are the stored limits; nil when the scope stores a mode
	// alone.
	Limits []limiter.Limit
	// Mode is the scope's mode; ModeEnforce when it stores limits alone.
	Mode Mode
}

// ListLimits returns the limits and modes stored in the namespace (the
// scopes that have either): with entity "",
// every one, entities' first (by entity, each one's limits on every
// resource first, then per resource in order), then resources' (in order);
// otherwise only that entity's.
func (a *Admin) ListLimits(ctx context.Context, entity string) ([]StoredLimits, error) {
	if err := a.begin(ctx); err != nil {
		return nil, err
	}
	prefix := keys.ConfigLimitsPrefix
	if entity != "" {
		if err := checkEntity("entity", entity); err != nil {
			return nil, err
		}
		prefix = keys.LimitsIndexSK(entity, "")
	}
	ids, got, err := a.listConfig(ctx, prefix, 0)
	if err != nil {
		return nil, err
	}
	var res []StoredLimits
	for i, it := range got {
		if it == nil {
			continue
		}
		ls, _, err := limitsOf(it)
		mode, merr := items.DecodeMode(it)
		if err = errors.Join(err, merr); err != nil {
			return nil, errors.Join(err, errors.New("limiter: in the limits of "+ids[i].scope.String()+
				"; overwrite them with PutLimits and SetMode, or remove them with DeleteLimits and SetMode"))
		}
		res = append(res, StoredLimits{Scope: ids[i].scope, Limits: ls, Mode: Mode(mode)})
	}
	return res, nil
}

// String returns "entity E", "entity E on resource R" or "resource R".
func (s Scope) String() string {
	switch {
	case s.Entity == "":
		return "resource " + strconv.Quote(s.Resource)
	case s.Resource == "":
		return "entity " + strconv.Quote(s.Entity)
	}
	return "entity " + strconv.Quote(s.Entity) + " on resource " + strconv.Quote(s.Resource)
}

type configID struct {
	entity string
	scope  Scope
}

// listConfig queries the namespace's configuration index for sort keys
// with prefix and reads the items (nil where one went away meanwhile).
func (a *Admin) listConfig(ctx context.Context, prefix string, limit int) ([]configID, []store.Item, error) {
	out, err := a.st.Query(ctx, store.QueryInput{Index: store.IndexGSI3,
		PartitionKey: keys.ConfigIndexPK(a.ns), SortKeyPrefix: prefix, Limit: limit})
	if err != nil {
		return nil, nil, storeErr(ctx, "list", err)
	}
	var ids []configID
	var ks []store.Key
	for _, it := range out.Items {
		sk, _ := it.Str(store.AttrGSI3SK)
		e, r, isLimits, ok := keys.ParseConfigIndexSK(sk)
		k, okKey := it.Key()
		if !ok || !okKey {
			continue
		}
		id := configID{entity: e}
		if isLimits {
			if r == keys.AnyResource {
				r = ""
			}
			id.scope = Scope{Entity: e, Resource: r}
		}
		ids = append(ids, id)
		ks = append(ks, k)
	}
	items, err := a.batchGet(ctx, ks)
	return ids, items, err
}

// batchGet reads keys strongly consistently, 100 at a time.
func (a *Admin) batchGet(ctx context.Context, ks []store.Key) ([]store.Item, error) {
	items := make([]store.Item, 0, len(ks))
	for first := 0; first < len(ks); first += 100 {
		out, err := a.st.BatchGet(ctx, store.BatchGetInput{Keys: ks[first:min(first+100, len(ks))], ConsistentRead: true})
		if err != nil {
			return nil, storeErr(ctx, "read", err)
		}
		items = append(items, out.Items...)
	}
	return items, nil
}

// BucketInfo describes a stored bucket.
type BucketInfo struct {
	// Entity and Resource identify the bucket.
	Entity, Resource string
	// Shards is the shard count in force, from shard 0; 0 when shard 0
	// does not exist (the bucket expired, was reset, or is being created).
	Shards int
	// Items is the number of shard items found in the index (eventually
	// consistent): shards are created lazily, so it may be below Shards.
	Items int
	// Limits are the limits shard 0 was last written with, in name order
	// (nil without shard 0). Stored limits, when there are any, are what
	// the next write applies.
	Limits []limiter.Limit
}

// Buckets returns the buckets of an entity, in resource order: every one
// when resource is "", else at most the one of that resource. It issues one
// Query of the entity's GSI3 partition and one strongly consistent batch
// read of shard 0 per 100 buckets.
func (a *Admin) Buckets(ctx context.Context, entity, resource string) ([]BucketInfo, error) {
	if err := cmp.Or(a.begin(ctx), checkEntity("entity", entity)); err != nil {
		return nil, err
	}
	if resource != "" {
		if err := checkResource("resource", resource); err != nil {
			return nil, err
		}
	}
	ns := a.ns
	out, err := a.st.Query(ctx, store.QueryInput{Index: store.IndexGSI3,
		PartitionKey: keys.EntityPK(ns, entity), SortKeyPrefix: keys.BucketIndexPrefix(resource)})
	if err != nil {
		return nil, storeErr(ctx, "buckets", err)
	}
	count := map[string]int{}
	for _, it := range out.Items {
		sk, _ := it.Str(store.AttrGSI3SK)
		if r, _, ok := keys.ParseBucketIndexSK(sk); ok {
			count[r]++
		}
	}
	if resource != "" {
		count[resource] += 0 // shard 0 may exist before its index entry does
	}
	resources := slices.Sorted(maps.Keys(count))
	ks := make([]store.Key, len(resources))
	for i, r := range resources {
		ks[i] = keys.Bucket{Namespace: ns, Entity: entity, Resource: r}.Key()
	}
	items, err := a.batchGet(ctx, ks)
	if err != nil {
		return nil, err
	}
	var res []BucketInfo
	for i, r := range resources {
		b := BucketInfo{Entity: entity, Resource: r, Items: count[r]}
		if it := items[i]; it != nil {
			b.Shards = int(keys.ShardCount(it))
			if b.Limits, err = bucketLimits(it); err != nil {
				return nil, err
			}
		}
		if b.Shards > 0 || b.Items > 0 {
			res = append(res, b)
		}
	}
	return res, nil
}

// bucketLimits returns the original limits a bucket item holds, without
// the hidden wcu limit.
func bucketLimits(it store.Item) ([]limiter.Limit, error) {
	comp, err := bucket.Decode(it.Numbers())
	if err != nil {
		return nil, err
	}
	var ls []limiter.Limit
	for _, n := range comp.Limits {
		if n.Name == keys.HiddenLimit {
			continue
		}
		m := int64(bucket.MilliPerToken)
		ls = append(ls, limiter.Limit{Name: n.Name, Capacity: n.Capacity / m, Burst: n.Burst / m, Refill: n.RefillAmount / m,
			Period: time.Duration(n.RefillPeriod) * time.Millisecond})
	}
	return ls, nil
}

// TableSchemaVersion reads the table's schema-version item (see
// SchemaVersion) without writing: found is false on a table no limiter has
// used yet.
func (a *Admin) TableSchemaVersion(ctx context.Context) (version int64, found bool, err error) {
	if err := a.begin(ctx); err != nil {
		return 0, false, err
	}
	out, err := a.st.Get(ctx, store.GetInput{Key: keys.Schema(), ConsistentRead: true})
	if err != nil {
		return 0, false, storeErr(ctx, "schema version", err)
	}
	if out.Item == nil {
		return 0, false, nil
	}
	return items.Version(out.Item), true, nil
}

// InitTable writes the table's schema-version item when there is none, and
// otherwise checks it: an error matching ErrSchemaVersion means the table
// holds another layout. Limiters do the same on their first read of
// configuration; an operator runs it once after creating the table.
func (a *Admin) InitTable(ctx context.Context) error {
	if err := a.begin(ctx); err != nil {
		return err
	}
	out, err := a.st.Get(ctx, store.GetInput{Key: keys.Schema(), ConsistentRead: true})
	if err != nil {
		return storeErr(ctx, "schema version", err)
	}
	return storeErr(ctx, "schema version", items.CheckSchema(ctx, a.st, out.Item, func(store.Capacity, error) {}))
}
