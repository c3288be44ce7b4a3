package keys

import (
	"math"
	"slices"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/store"
)

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

// ShardCount returns a bucket item's shard_count: 1 for a nil item, and
// when the attribute is absent or below 1 (as the limiter reads it).
func ShardCount(it store.Item) int64 {
	if n, ok := it.Int(AttrShardCount); ok && n >= 1 {
		return n
	}
	return 1
}

// Limits is what a write that changes a bucket item's shard count must
// know of the item: the application limits it holds (HiddenLimit aside)
// and the limits hash it holds them under. The write is conditional on
// that hash, so the names are exactly the item's.
type Limits struct {
	Names []string // in name order
	// Hash is the item's AttrLimitsHash; NoHash: the item has none.
	Hash   int64
	NoHash bool
}

// LimitsOf returns the limits a bucket item holds, read from its
// attributes (none for an item without limits). it must not be a nil
// View; a nil Item is an item without attributes.
func LimitsOf(it store.Item) Limits {
	h, ok := it.Int(AttrLimitsHash)
	l := Limits{Hash: h, NoHash: !ok}
	for attr := range it.Numbers() { // a limit's tokens are a number
		if name, field, ok := bucket.ParseAttrName(attr); ok && field == bucket.FieldTokens && name != HiddenLimit {
			l.Names = append(l.Names, name)
		}
	}
	slices.Sort(l.Names) // map order must not reach the expression
	return l
}

// withCount adds to a write that changes an item's shard count what every
// such write needs: the limits' full-at guards reset, conditional on the
// limits hash.
//
// The count divides every application limit among the shards, so the
// item's per-shard burst and rate change with it while its tokens stay,
// and its guards (fl <= the instant the bucket is full again <= fh) bound
// an instant computed at the old count. With the burst halved, a bucket
// may be full already while fl says it is not: a consumption-only write
// (conditional on fl > now) would then take from a full bucket without
// moving rf, and the next refill would credit the time it sat full a
// second time. So fl becomes 0 and fh the largest int64: the guards hold
// whatever the bucket holds, the consumption-only and full writes fail on
// them, and the next write is a normal write under the rf lock, which
// computes both afresh at the new count.
func (l Limits) withCount(u store.Update, cond store.Condition) (store.Update, store.Condition) {
	for _, name := range l.Names {
		u = u.Set(bucket.AttrName(name, FieldFullLo), store.Int(0)).
			Set(bucket.AttrName(name, FieldFullHi), store.Int(math.MaxInt64))
	}
	hash := store.Name(AttrLimitsHash).Equal(store.Int(l.Hash))
	if l.NoHash {
		hash = store.Name(AttrLimitsHash).NotExists()
	}
	return u, store.And(cond, hash)
}

// DoubleShards is the one write that grows a bucket's shard count: SET
// shard_count = 2*from on shard 0, only if it is still from. Racing
// writers (clients that found a partition hot, the aggregator acting
// ahead of them) therefore produce exactly one doubling per level, and the
// count runs 1, 2, 4, ... without skips or decreases. On a condition
// failure the old item comes back with the count in force.
//
// limits are the limits shard 0 holds (LimitsOf its item, or the plan it
// was written for): the write resets their guards (see Limits) and is
// conditional on their hash too. It fails, with the count still from,
// when shard 0 holds other limits; LimitsOf the returned item then makes
// the write that lands.
func DoubleShards(b Bucket, from int64, limits Limits) store.UpdateInput {
	u, cond := limits.withCount(store.Update{}.Set(AttrShardCount, store.Int(2*from)),
		store.Name(AttrShardCount).Equal(store.Int(from)))
	return store.UpdateInput{
		Key:                         b.WithShard(0).Key(),
		Expr:                        build(u, cond),
		Return:                      store.ReturnAllNew,
		ReturnOldOnConditionFailure: true,
	}
}

// RaiseShardCount sets the shard count of a shard other than 0 to n,
// shard 0's count, if the shard exists with a lower count and holds the
// given limits (shard 0's: see Limits, which it resets). It saves the
// shard's clients a failed write; a shard that holds other limits is left
// to them (their write conditional on the count fails and rescales it).
func RaiseShardCount(b Bucket, n int64, limits Limits) store.UpdateInput {
	u, cond := limits.withCount(store.Update{}.Set(AttrShardCount, store.Int(n)),
		store.And(store.Name(store.AttrPK).Exists(), store.Name(AttrShardCount).LessThan(store.Int(n))))
	return store.UpdateInput{Key: b.Key(), Expr: build(u, cond)}
}

// IfAbsent is the condition of a Put that creates an item:
// attribute_not_exists(PK), true only when no item has the Put's key.
func IfAbsent() store.Expr {
	return build(store.Update{}, store.Name(store.AttrPK).NotExists())
}

// build is store.Build for this package's writes, which it cannot fail:
// their names are never empty and their values are numbers.
func build(u store.Update, c store.Condition) store.Expr {
	e, err := store.Build(u, c)
	if err != nil {
		panic("keys: " + err.Error())
	}
	return e
}

// MaxShards bounds doubling, for the clients and the aggregator alike: 256
// partitions absorb 256,000 writes a second.
const MaxShards = 256
