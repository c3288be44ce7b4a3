package admin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Namespaces. Every item of a namespace has a partition key that begins
// with "{ns}/" (see docs/dynamodb.md). The data plane creates buckets, and
// the aggregator usage snapshots, without the control plane knowing, so no
// registry or index lists a namespace's items: the calls here find them
// with a Scan of the table (store.Store.Scan), which reads, and is billed
// for, every item of the table (one read unit per 8 KB, eventually
// consistent). They are operator commands, not for a request path.

// ErrUnknownNamespace is the error (matched with errors.Is) of
// Admin.Namespace and Admin.DeleteNamespace for a namespace that has no
// item in the table.
var ErrUnknownNamespace = errors.New("limiter: the namespace has no item in the table")

// NamespaceInfo counts the items of a namespace, by kind. Its JSON form
// has the names in snake_case ("namespace", "bucket_shard_items",
// "stored_limits" for Name, BucketItems and Limits).
type NamespaceInfo struct {
	// Name is the namespace (see WithNamespace).
	Name string `json:"namespace"`
	// Items is every item of the namespace, of any kind.
	Items int `json:"items"`
	// Buckets counts buckets, one per (entity, resource) whatever its
	// shard count; BucketItems counts their shard items.
	Buckets     int `json:"buckets"`
	BucketItems int `json:"bucket_shard_items"`
	// Resources counts the distinct resources of the buckets.
	Resources int `json:"resources"`
	// Entities counts entity items (written with PutEntity).
	Entities int `json:"entities"`
	// Limits counts stored-limits items (of entities and of resources).
	Limits int `json:"stored_limits"`
	// UsageSnapshots and AuditRecords count the aggregator's usage
	// snapshots and audit records.
	UsageSnapshots int `json:"usage_snapshots"`
	AuditRecords   int `json:"audit_records"`
	// Other counts items of the namespace of none of these kinds (none
	// the limiter writes).
	Other int `json:"other"`
}

// nsCounter adds up NamespaceInfo from item keys.
type nsCounter struct {
	info      NamespaceInfo
	buckets   map[string]bool // entity#resource
	resources map[string]bool
}

func newCounter(name string) *nsCounter {
	return &nsCounter{info: NamespaceInfo{Name: name}, buckets: map[string]bool{}, resources: map[string]bool{}}
}

// add counts the item at k, whose partition key is in the namespace.
func (c *nsCounter) add(k store.Key) {
	c.info.Items++
	rest := k.PK[len(c.info.Name)+1:]
	switch {
	case strings.HasPrefix(rest, "BUCKET#"):
		c.info.BucketItems++
		if b, ok := keys.ParseBucketPK(k.PK); ok {
			c.buckets[b.Entity+"#"+b.Resource] = true
			c.resources[b.Resource] = true
			c.info.Buckets, c.info.Resources = len(c.buckets), len(c.resources)
		}
	case strings.HasPrefix(rest, "ENTITY#") && k.SK == keys.SKEntity:
		c.info.Entities++
	case (strings.HasPrefix(rest, "ENTITY#") || strings.HasPrefix(rest, "RESOURCE#")) && strings.HasPrefix(k.SK, keys.SKLimits):
		c.info.Limits++
	case strings.HasPrefix(rest, "AUDIT#"):
		c.info.AuditRecords++
	case strings.HasPrefix(rest, "USAGE#"):
		c.info.UsageSnapshots++
	default:
		c.info.Other++
	}
}

// scanPages calls page with the keys of each Scan page of the items whose
// partition key begins with prefix, to the end of the table.
func scanPages(ctx context.Context, st store.Store, prefix string, page func([]store.Key) error) error {
	in := store.ScanInput{PartitionKeyPrefix: prefix}
	for {
		out, err := st.Scan(ctx, in)
		if err != nil {
			return storeErr(ctx, "scan", err)
		}
		ks := make([]store.Key, 0, len(out.Items))
		for _, it := range out.Items {
			if k, ok := it.Key(); ok && strings.HasPrefix(k.PK, prefix) {
				ks = append(ks, k)
			}
		}
		if err := page(ks); err != nil {
			return err
		}
		if out.Next == nil {
			return nil
		}
		in.Start = out.Next
	}
}

// ListNamespaces returns every namespace that has at least one item in the
// table behind st, in name order, with its counts. It scans the whole
// table once (see Admin.Namespace for the cost). Items outside every
// namespace (the schema-version item) are not counted.
func ListNamespaces(ctx context.Context, st store.Store) ([]NamespaceInfo, error) {
	if ctx == nil {
		return nil, invalid("ctx", "must not be nil (use context.Background())")
	}
	if st == nil {
		return nil, invalid("store", "must not be nil")
	}
	counters := map[string]*nsCounter{}
	err := scanPages(ctx, st, "", func(ks []store.Key) error {
		for _, k := range ks {
			ns, _, found := strings.Cut(k.PK, "/")
			if !found || !keys.ValidNamespace(ns) {
				continue
			}
			c := counters[ns]
			if c == nil {
				c = newCounter(ns)
				counters[ns] = c
			}
			c.add(k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res := make([]NamespaceInfo, 0, len(counters))
	for _, c := range counters {
		res = append(res, c.info)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Name < res[j].Name })
	return res, nil
}

// Namespace returns the counts of the Admin's namespace. It scans the
// whole table, with a filter on the namespace's prefix: DynamoDB bills
// every item read, in the namespace or not (a 10 GB table costs about 1.3
// million read units), and the counts are eventually consistent. A
// namespace without any item is an error matching ErrUnknownNamespace.
func (a *Admin) Namespace(ctx context.Context) (NamespaceInfo, error) {
	if err := a.begin(ctx); err != nil {
		return NamespaceInfo{}, err
	}
	c := newCounter(a.ns)
	err := scanPages(ctx, a.st, a.ns+"/", func(ks []store.Key) error {
		for _, k := range ks {
			c.add(k)
		}
		return nil
	})
	if err != nil {
		return NamespaceInfo{}, err
	}
	if c.info.Items == 0 {
		return NamespaceInfo{}, fmt.Errorf("namespace %q: %w", a.ns, ErrUnknownNamespace)
	}
	return c.info, nil
}

// DeleteNamespaceOptions tunes DeleteNamespace.
type DeleteNamespaceOptions struct {
	// WriteUnitsPerSecond bounds the write capacity the deletes consume,
	// as the store reports it (a delete costs one unit per KB of the item,
	// at least one, plus one per index entry it removes: a bucket item
	// costs at least three). 0 means DefaultDeleteRate. Keep it well under the
	// table's provisioned write capacity, or under what on-demand traffic
	// can absorb, so that the data planes of other namespaces are not
	// throttled.
	WriteUnitsPerSecond float64
	// Progress, when set, is called after each batch of deletes, on the
	// calling goroutine, with the counts of the items deleted so far.
	Progress func(deleted NamespaceInfo)
}

// DefaultDeleteRate is the write units per second DeleteNamespace spends
// by default.
const DefaultDeleteRate = 500

// deleteBatch is the number of deletes issued at once (as DynamoDB's
// BatchWriteItem).
const deleteBatch = 25

// Backoff after a throttled batch: from minBackoff, doubling to
// maxBackoff, back to minBackoff after a batch without a throttle.
const (
	minBackoff = 50 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// DeleteNamespace deletes every item of the Admin's namespace: its stored
// limits, entities, buckets (every shard), audit records and usage
// snapshots. Other namespaces and the schema-version item are not touched.
// It returns the counts of what it deleted.
//
// It scans the table a page at a time (the cost of Namespace) and deletes
// each page's items in batches of 25 single-item deletes, paced to
// opts.WriteUnitsPerSecond by the Admin's clock, which it sleeps with when
// it is a limiter.Sleeper (the scan's reads are not paced);
// a throttled delete is retried after a backoff
// (50 ms, doubling to 5 s). It keeps no state outside the table: when it
// is interrupted (a cancelled context, a failure), what it deleted is gone
// and running it again deletes the rest. The deletes are not a
// transaction and write no audit record (the namespace's audit trail goes
// with it).
//
// Stop the namespace's data plane first (remove its IAM policy, see
// docs/dynamodb.md): a limiter that acquires meanwhile recreates its
// buckets, which a scan already past them does not see; run it again, or
// check with Namespace. A namespace without any item is an error matching
// ErrUnknownNamespace, and nothing is written.
func (a *Admin) DeleteNamespace(ctx context.Context, opts DeleteNamespaceOptions) (NamespaceInfo, error) {
	if err := a.begin(ctx); err != nil {
		return NamespaceInfo{}, err
	}
	rate := opts.WriteUnitsPerSecond
	if rate < 0 || math.IsNaN(rate) {
		return NamespaceInfo{}, invalid("WriteUnitsPerSecond", "%v must not be negative (0 means DefaultDeleteRate, %d)", rate, DefaultDeleteRate)
	}
	if rate == 0 {
		rate = DefaultDeleteRate
	}
	defer a.lim.Invalidate()
	d := deleter{a: a, rate: rate, start: a.clock.Now(), done: newCounter(a.ns), progress: opts.Progress}
	err := scanPages(ctx, a.st, a.ns+"/", func(ks []store.Key) error {
		for first := 0; first < len(ks); first += deleteBatch {
			if err := d.batch(ctx, ks[first:min(first+deleteBatch, len(ks))]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return d.done.info, fmt.Errorf("limiter: delete namespace %q: %d items deleted, run it again to delete the rest: %w",
			a.ns, d.done.info.Items, err)
	}
	if d.done.info.Items == 0 {
		return d.done.info, fmt.Errorf("namespace %q: %w", a.ns, ErrUnknownNamespace)
	}
	return d.done.info, nil
}

// deleter deletes a namespace's items in paced batches.
type deleter struct {
	a        *Admin
	rate     float64 // write units per second
	start    time.Time
	spent    float64 // write units consumed since start
	backoff  time.Duration
	done     *nsCounter
	progress func(NamespaceInfo)
}

// batch deletes ks, retrying throttled deletes after a backoff, then
// waits as long as the pace requires.
func (d *deleter) batch(ctx context.Context, ks []store.Key) error {
	for len(ks) > 0 {
		writes := make([]store.Write, len(ks))
		for i, k := range ks {
			writes[i] = store.Write{Delete: &store.DeleteInput{Key: k}}
		}
		var again []store.Key
		var failed error
		for i, r := range d.a.st.WriteConcurrently(ctx, writes) {
			d.spent += max(r.Output.Consumed.WriteUnits, 1)
			switch {
			case r.Err == nil:
				d.done.add(ks[i])
			case errors.Is(r.Err, store.ErrThrottled) && ctx.Err() == nil:
				again = append(again, ks[i])
			default:
				if failed == nil {
					failed = r.Err
				}
			}
		}
		if d.progress != nil {
			d.progress(d.done.info)
		}
		if failed != nil {
			return storeErr(ctx, "delete namespace", failed)
		}
		wait := time.Duration(d.spent / d.rate * float64(time.Second))
		wait -= d.a.clock.Now().Sub(d.start)
		if len(again) > 0 {
			d.backoff = min(max(2*d.backoff, minBackoff), maxBackoff)
			wait = max(wait, d.backoff)
		} else {
			d.backoff = 0
		}
		sl, ok := d.a.clock.(limiter.Sleeper)
		if !ok {
			sl = systemClock{}
		}
		if err := sl.Sleep(ctx, wait); err != nil {
			return err
		}
		ks = again
	}
	return nil
}

// Sleep waits d on a wall-clock timer (nothing when d <= 0) or until ctx
// is done.
func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
