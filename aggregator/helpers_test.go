package aggregator

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
	"github.com/shardlimit/limiter/store/storetest"
)

// wcuLimit is the limiter's hidden per-partition limit: 1000 writes a
// second, in millitokens.
var wcuLimit = bucket.Limit{Capacity: 1_000_000, Burst: 1_000_000, RefillAmount: 1_000_000, RefillPeriod: 1000}

// perMinute returns a limit of n tokens a minute, in millitokens.
func perMinute(n int64) bucket.Limit {
	return bucket.Limit{Capacity: n * 1000, Burst: n * 1000, RefillAmount: n * 1000, RefillPeriod: 60_000}
}

// bucketItem builds a bucket item the way the limiter's Create path does:
// every limit full minus its initial charge tc (shard 0) or empty (other
// shards), plus the hidden wcu limit.
func bucketItem(b keys.Bucket, count int64, at time.Time, limits map[string]bucket.Limit, tc map[string]int64) store.Item {
	now := at.UnixMilli()
	it := store.Item{
		store.AttrPK:        store.Str(b.PK()),
		store.AttrSK:        store.Str(keys.SKBucket),
		keys.AttrEntity:     store.Str(b.Entity),
		keys.AttrResource:   store.Str(b.Resource),
		keys.AttrShard:      store.Int(int64(b.Shard)),
		keys.AttrShardCount: store.Int(count),
		keys.AttrLimitsHash: store.Int(12345),
		bucket.AttrRefill:   store.Int(now),
		store.AttrTTL:       store.Int(now/1000 + 7200),
	}
	for _, ix := range b.IndexAttrs() {
		it[ix.Name] = store.Str(ix.Value)
	}
	all := map[string]bucket.Limit{keys.HiddenLimit: wcuLimit}
	for n, l := range limits {
		all[n] = l
	}
	for n, l := range all {
		tk := l.Burst - tc[n]
		if b.Shard != 0 && n != keys.HiddenLimit {
			tk = 0
		}
		it[bucket.AttrName(n, bucket.FieldTokens)] = store.Int(tk)
		it[bucket.AttrName(n, bucket.FieldCapacity)] = store.Int(l.Capacity)
		it[bucket.AttrName(n, bucket.FieldBurst)] = store.Int(l.Burst)
		it[bucket.AttrName(n, bucket.FieldRefillAmount)] = store.Int(l.RefillAmount)
		it[bucket.AttrName(n, bucket.FieldRefillPeriod)] = store.Int(l.RefillPeriod)
		it[bucket.AttrName(n, bucket.FieldTotalConsumed)] = store.Int(tc[n])
		it["b_"+n+"_"+keys.FieldFullLo] = store.Int(now)
		it["b_"+n+"_"+keys.FieldFullHi] = store.Int(now)
	}
	return it
}

func putBucket(t testing.TB, st store.Store, it store.Item) {
	t.Helper()
	if _, err := st.Put(context.Background(), store.PutInput{Item: it}); err != nil {
		t.Fatalf("put bucket: %v", err)
	}
}

// charge applies an acquire-like write: ADD tk -amount, tc +amount per
// limit, and one write unit of wcu.
func charge(t testing.TB, st store.Store, b keys.Bucket, amounts map[string]int64) {
	t.Helper()
	u := store.Update{}
	for _, n := range sortedKeys(amounts) {
		u = u.Add(bucket.AttrName(n, bucket.FieldTokens), store.Int(-amounts[n])).
			Add(bucket.AttrName(n, bucket.FieldTotalConsumed), store.Int(amounts[n]))
	}
	u = u.Add(bucket.AttrName(keys.HiddenLimit, bucket.FieldTokens), store.Int(-1000)).
		Add(bucket.AttrName(keys.HiddenLimit, bucket.FieldTotalConsumed), store.Int(1000))
	_, err := st.Update(context.Background(), store.UpdateInput{Key: b.Key(),
		Expr: storetest.Build(t, u, store.Name(store.AttrPK).Exists())})
	if err != nil {
		t.Fatalf("charge %s: %v", b.PK(), err)
	}
}

// set SETs number attributes of a bucket item.
func set(t testing.TB, st store.Store, key store.Key, attrs map[string]int64) {
	t.Helper()
	u := store.Update{}
	for _, n := range sortedKeys(attrs) {
		u = u.Set(n, store.Int(attrs[n]))
	}
	if _, err := st.Update(context.Background(), store.UpdateInput{Key: key, Expr: storetest.Build(t, u, store.Condition{})}); err != nil {
		t.Fatalf("set %v: %v", key, err)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// fromMemsim converts memsim's stream records as the simulator does.
func fromMemsim(rs []memsim.Record) []Record {
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = FromStream(strconv.FormatUint(r.Seq, 10), r.Event, r.Keys, r.Old, r.New, r.At)
	}
	return out
}

// newStore returns a memsim store with its clock at t and no partition
// ceilings.
func newStore(t time.Time, opts ...memsim.Option) (*memsim.Store, *memsim.ManualClock) {
	clk := memsim.NewManualClock(t)
	return memsim.New(append([]memsim.Option{memsim.WithClock(clk), memsim.WithPartitionLimits(0, 0)}, opts...)...), clk
}

func newProcessor(t testing.TB, st store.Store, opts Options) *Processor {
	t.Helper()
	p, err := New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// loadEvent decodes a Lambda event fixture.
func loadEvent(t testing.TB, name string) events.DynamoDBEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

// snapshot is a usage snapshot as read back, for comparisons.
type snapKey struct {
	ns, entity, resource, limit string
	window                      keys.UsageWindow
	start                       int64 // Unix ms
}

type snapVal struct{ consumed, events int64 }

// readSnapshots sums every usage snapshot item of st over shards.
func readSnapshots(items []store.Item) map[snapKey]snapVal {
	out := make(map[snapKey]snapVal)
	for _, it := range items {
		sk, _ := it.Str(store.AttrSK)
		pk, _ := it.Str(store.AttrPK)
		w, res, start, _, ok := keys.ParseUsageSK(sk)
		if !ok {
			continue
		}
		ns, entity, found := cutUsagePK(pk)
		if !found {
			continue
		}
		for name, v := range it {
			limit, ev, ok := keys.ParseUsageAttr(name)
			n, _ := v.AsInt()
			if !ok {
				continue
			}
			k := snapKey{ns, entity, res, limit, w, start.UnixMilli()}
			s := out[k]
			if ev {
				s.events += n
			} else {
				s.consumed += n
			}
			out[k] = s
		}
	}
	return out
}

func cutUsagePK(pk string) (ns, entity string, ok bool) {
	for i := 0; i+7 <= len(pk); i++ {
		if pk[i:i+7] == "/USAGE#" {
			return pk[:i], pk[i+7:], true
		}
	}
	return "", "", false
}
