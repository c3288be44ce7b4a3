package keys

import (
	"strconv"
	"strings"

	"github.com/shardlimit/limiter/store"
)

// ShardsQuery is the query that finds the shards of b's bucket that
// exist: the keys-only GSI3 holds one entry per bucket item under its
// entity, sorted by resource and shard. It is eventually consistent, as
// every index query: a shard created a moment ago may be missing.
func (b Bucket) ShardsQuery() store.QueryInput {
	return store.QueryInput{Index: store.IndexGSI3, PartitionKey: EntityPK(b.Namespace, b.Entity),
		SortKeyPrefix: "BUCKET#" + b.Resource + "#"}
}

// ShardOf returns the shard number of a GSI3 entry that ShardsQuery
// returned for b, or ok false when the item is not one of b's shards.
func (b Bucket) ShardOf(it store.Item) (shard int, ok bool) {
	sk, _ := it.Str(store.AttrGSI3SK) // "" when absent: not a shard's
	rest, found := strings.CutPrefix(sk, "BUCKET#"+b.Resource+"#")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}
