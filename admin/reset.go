package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// ResetBucket deletes every shard item of an (entity, resource) bucket, so
// that it starts again as a bucket never written: full. It returns the
// shard count the bucket had (the number of shard items found when shard 0
// was already gone; 0, with nothing written and nothing recorded, when
// there was no bucket). The deletes and the audit record
// are one transaction for a bucket of up to 99 shard items; a bucket of
// more (128 or 256 shards) is deleted in transactions of 100 items, the
// first of them holding the audit record.
//
// The shards are found from shard 0's count (read strongly consistently)
// and the entity's GSI3 entries (which also finds shards a limiter with a
// stale count created beyond it).
//
// What concurrent callers see:
//
//   - An acquire sees the bucket before the reset or after it, never half
//     of it (up to 99 shard items). A charge made just before is wiped with
//     the bucket; the Adjust or Rollback of its lease then finds no item
//     and does nothing (debt forgiven, nothing to refund).
//   - The next acquire creates the bucket afresh. A limiter that knew the
//     bucket at one shard, or did not know it (a new process, this one),
//     recreates it full, at one shard. A limiter in another process that
//     last saw it at n > 1 shards recreates shard 0 with its 1/n share of
//     the burst and the other shards empty (each refills at 1/n of the
//     rate), as for a doubling: the reset then grants 1/n of the burst at
//     once, and acquires that land on an empty shard before shard 0 is
//     written again may be refused with a short retry-after. The admission
//     bound holds throughout: a reset never lets more through than a new
//     bucket would.
//   - The usage counters of the deleted items are gone from the bucket;
//     the aggregator's usage snapshots keep what was consumed.
func (a *Admin) ResetBucket(ctx context.Context, entity, resource string) (shards int, err error) {
	if err := cmp.Or(a.begin(ctx), checkEntity("entity", entity), checkResource("resource", resource)); err != nil {
		return 0, err
	}
	who, err := a.principalOf(ctx)
	if err != nil {
		return 0, err
	}
	ref := keys.Bucket{Namespace: a.ns, Entity: entity, Resource: resource}
	out, err := a.st.Get(ctx, store.GetInput{Key: ref.Key(), ConsistentRead: true})
	if err != nil {
		return 0, storeErr(ctx, "reset bucket", err)
	}
	found := map[int]bool{}
	if out.Item != nil {
		shards = int(min(keys.ShardCount(out.Item), keys.MaxShards))
		for s := range shards {
			found[s] = true
		}
	}
	idx, err := a.st.Query(ctx, store.QueryInput{Index: store.IndexGSI3,
		PartitionKey: keys.EntityPK(ref.Namespace, entity), SortKeyPrefix: keys.BucketIndexPrefix(resource)})
	if err != nil {
		return 0, storeErr(ctx, "reset bucket", err)
	}
	for _, it := range idx.Items {
		sk, _ := it.Str(store.AttrGSI3SK)
		if r, s, ok := keys.ParseBucketIndexSK(sk); ok && r == resource {
			found[s] = true
		}
	}
	if len(found) == 0 {
		return 0, nil
	}
	all := slices.Sorted(maps.Keys(found))
	if shards == 0 { // shard 0 is gone, others remain
		shards = len(all)
	}
	defer a.lim.ForgetBucket(entity, resource)
	var acts []store.Write
	acts = append(acts, a.auditItem(who, AuditResetBucket, Scope{Entity: entity, Resource: resource},
		&AuditState{Shards: shards}, nil, 0))
	for _, s := range all {
		acts = append(acts, store.Write{Delete: &store.DeleteInput{Key: ref.WithShard(s).Key()}})
	}
	for first := 0; first < len(acts); first += 100 {
		if err := a.transactRetrying(ctx, acts[first:min(first+100, len(acts))]); err != nil {
			if first > 0 {
				err = fmt.Errorf("limiter: reset bucket: %d of %d shard items deleted, run the reset again: %w", first-1, len(all), err)
			}
			return 0, storeErr(ctx, "reset bucket", err)
		}
	}
	return shards, nil
}

// transactRetrying runs a transaction of unconditional writes, again when
// it lost a race with single-item writes on the same items (DynamoDB
// cancels a transaction that meets a concurrent write).
func (a *Admin) transactRetrying(ctx context.Context, acts []store.Write) error {
	var err error
	for attempt := 0; attempt < maxChangeAttempts; attempt++ {
		if _, err = a.st.TransactWrite(ctx, store.TransactWriteInput{Actions: acts}); err == nil {
			return nil
		}
		var tc *store.TransactionCanceledError
		if !errors.Is(err, store.ErrTransactionConflict) && !(errors.As(err, &tc) && retryable(tc)) {
			return err
		}
	}
	return err
}
