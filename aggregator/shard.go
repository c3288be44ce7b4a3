package aggregator

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// shardZero handles a record of a bucket's shard 0: it propagates a grown
// shard count to the other shards and doubles the count when shard 0 is
// hot.
func (p *Processor) shardZero(ctx context.Context, e *entry, st *Stats) error {
	r := e.r
	n := keys.ShardCount(r.New)
	// A new shard 0 (the first, or one recreated after it expired) may
	// come with a count above the other shards': propagate it too, but it
	// is no doubling, so no cooldown.
	insert := r.EventName == EventInsert
	grew := !insert && n > keys.ShardCount(r.Old)
	p.learn(e.pk, e.seq, n, e.at, insert, grew)
	// Doubling first: it is the time-critical half, and the propagation
	// writes go to shards that may be too hot to take them.
	first := p.maybeDouble(ctx, e, n, st)
	if grew || insert && n > 1 {
		if err := p.propagate(ctx, e.b, n, keys.LimitsOf(r.New), st); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// maybeDouble doubles the bucket's shard count from n when shard 0's wcu
// balance, refilled to the record's time, is below the threshold, unless
// the count already moved past n, grew too recently, is at its ceiling, or
// doubling would leave a limit with less than one token per shard.
func (p *Processor) maybeDouble(ctx context.Context, e *entry, n int64, st *Stats) error {
	if p.hotPercent == 0 {
		return nil
	}
	comp, err := bucket.Decode(e.r.New.Numbers())
	if err != nil {
		var de *bucket.DecodeError
		if errors.As(err, &de) {
			return malformed("NewImage."+de.Attr, de.Error())
		}
		return malformed("NewImage", err.Error())
	}
	wcu, ok := comp.Get(keys.HiddenLimit)
	if !ok {
		return nil
	}
	used := wcu.TotalConsumed
	if e.r.Old != nil {
		if old, ok := e.r.Old.Int(bucket.AttrName(keys.HiddenLimit, bucket.FieldTotalConsumed)); ok && old <= used {
			used -= old
		}
	}
	// The record's time has whole seconds in Lambda; rf is never later
	// than the write. The later of the two is the better estimate of now.
	now := max(e.at.UnixMilli(), comp.Refill)
	// Hot: within the meter's window, shard 0 used more than
	// (100 - HotPercent) % of what wcu refills in that time, as a wcu
	// bucket that starts the window full would then hold less than
	// HotPercent % of its capacity.
	window, slots := FineWindow, int64(fineSlots)
	if e.at.Nanosecond() == 0 { // whole seconds (or no time): see meterSlots
		window, slots = MeterWindow, meterSlots
	}
	win := window.Milliseconds()
	recent := p.meter(e.pk, e.seq, used, now, slots)
	if recent*100 <= wcu.RefillAmount*win/wcu.RefillPeriod*(100-p.hotPercent) {
		return nil
	}
	if 2*n > p.maxShards {
		return nil
	}
	for _, l := range comp.Limits {
		if l.Name != keys.HiddenLimit && l.Limit.PerShard(2*n).Burst < bucket.MilliPerToken {
			return nil // splitting further would leave a shard unable to serve one token
		}
	}
	if e.latest > n {
		return nil // a later record of this batch shows the count past n
	}
	if k, ok := p.knownState(e.pk); ok {
		if k.count > n {
			return nil // a stale record: the count has moved on
		}
		if k.count == n && p.cooldown > 0 && !k.since.IsZero() && e.at.Before(k.since.Add(p.cooldown)) {
			return nil // it just grew: shard 0 has not seen the relief yet
		}
	}
	// The record's image is shard 0 as it stands (or a later write
	// changed it: then the doubling fails, and a later record decides).
	out, err := p.st.Update(ctx, keys.DoubleShards(e.b, n, keys.LimitsOf(e.r.New)))
	st.Consumed = st.Consumed.Add(out.Consumed)
	if err == nil {
		st.Doublings++
		p.learn(e.pk, e.seq, 2*n, e.at, false, true)
		p.log.Info("aggregator: doubled shard count", "namespace", e.b.Namespace, "entity", e.b.Entity,
			"resource", e.b.Resource, "shards", 2*n, "wcu_used_millitokens", recent, "window", window)
		return nil
	}
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) {
		return err
	}
	st.DoublingsLost++
	if m, ok := cf.Item.Int(keys.AttrShardCount); ok && m > n {
		p.learn(e.pk, e.seq, m, e.at, false, true)
	}
	return nil
}

// propagate sets shard_count = n on every other existing shard of b whose
// count is lower and that holds shard 0's limits (keys.RaiseShardCount),
// found with a Query on GSI3 (keys only: the bucket items' keys).
func (p *Processor) propagate(ctx context.Context, b keys.Bucket, n int64, limits keys.Limits, st *Stats) error {
	// GSI3 sort keys are BUCKET#{resource}#{shard}; keep the shard off.
	sk := b.WithShard(0).IndexAttrs()[1]
	prefix := strings.TrimSuffix(sk.Value, "0")
	out, err := p.st.Query(ctx, store.QueryInput{Index: store.IndexGSI3, PartitionKey: keys.EntityPK(b.Namespace, b.Entity),
		SortKeyPrefix: prefix})
	st.Consumed = st.Consumed.Add(out.Consumed)
	if err != nil {
		return err
	}
	var shards []int
	for _, it := range out.Items {
		pk, _ := it.Str(store.AttrPK)
		sk, _ := it.Str(store.AttrSK)
		s, ok := keys.ParseBucketPK(pk)
		if !ok || sk != keys.SKBucket || s.Namespace != b.Namespace || s.Entity != b.Entity || s.Resource != b.Resource ||
			s.Shard == 0 {
			continue
		}
		shards = append(shards, s.Shard)
	}
	slices.Sort(shards)
	var first error
	raised := 0
	for _, s := range slices.Compact(shards) {
		out, err := p.st.Update(ctx, keys.RaiseShardCount(b.WithShard(s), n, limits))
		st.Consumed = st.Consumed.Add(out.Consumed)
		switch {
		case err == nil:
			st.Propagated++
			raised++
		case errors.Is(err, store.ErrConditionFailed):
			// Already there (or past it), or the shard expired meanwhile,
			// or it holds other limits (its clients rescale it).
		case errors.Is(err, store.ErrThrottled):
			// The shard is too hot to take the write. Propagation only
			// saves its clients a round trip (a write conditional on the
			// old count fails and returns the new one), so it is not worth
			// failing the record for: that would hold back every later
			// record of shard 0, and the next doubling with them.
			st.PropagationsThrottled++
		case first == nil:
			first = err
		}
	}
	if raised > 0 {
		p.log.Info("aggregator: propagated shard count", "namespace", b.Namespace, "entity", b.Entity,
			"resource", b.Resource, "shards", n, "items", raised)
	}
	return first
}
