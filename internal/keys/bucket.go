package keys

import "github.com/shardlimit/limiter/store"

// Bucket item attributes besides the per-limit b_{limit}_{field} ones
// (package bucket names those).
const (
	AttrEntity     = "entity_id"
	AttrResource   = "resource"
	AttrShard      = "shard"
	AttrShardCount = "shard_count"
	// AttrLimitsHash holds a hash of the limits the item was last written
	// for; a blind write is valid only while it matches.
	AttrLimitsHash = "lh"
	// FieldFullLo and FieldFullHi are per-limit fields beside bucket's six:
	// a lower and an upper bound of the instant (Unix ms) the bucket is full
	// again. See docs/write-paths.md.
	FieldFullLo = "fl"
	FieldFullHi = "fh"
	// HiddenLimit is the limiter's own per-partition write limit: charged
	// by every write, never divided among shards, never shown to users.
	HiddenLimit = "wcu"
)

// DoubleShards is the one write that grows a bucket's shard count: SET
// shard_count = 2*from on shard 0, only if it is still from. Racing
// writers (clients that found a partition hot, the aggregator acting
// ahead of them) therefore produce exactly one doubling per level, and the
// count runs 1, 2, 4, ... without skips or decreases. On a condition
// failure the old item comes back with the count in force.
func DoubleShards(b Bucket, from int64) store.UpdateInput {
	return store.UpdateInput{
		Key: b.WithShard(0).Key(),
		Expr: store.MustBuild(store.Update{}.Set(AttrShardCount, store.Int(2*from)),
			store.Name(AttrShardCount).Equal(store.Int(from))),
		Return:                      store.ReturnAllNew,
		ReturnOldOnConditionFailure: true,
	}
}

// MaxShards bounds doubling, for the clients and the aggregator alike: 256
// partitions absorb 256,000 writes a second.
const MaxShards = 256
