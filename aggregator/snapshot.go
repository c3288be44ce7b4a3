package aggregator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// group is the records of one bucket shard that fall in one snapshot
// window, in sequence-number order.
type group struct {
	u       keys.Usage
	key     store.Key
	members []*entry
}

// groups sorts the deltas of es (sorted by item, then sequence number) into
// snapshot groups, in order of first appearance: deterministic for a given
// batch content.
func (p *Processor) groups(es []*entry) []*group {
	var gs []*group
	index := make(map[store.Key]*group)
	for _, e := range es {
		if e.dupOf >= 0 || len(e.deltas) == 0 {
			continue
		}
		for _, w := range p.windows {
			kw := keys.UsageWindow(w)
			u := keys.Usage{Namespace: e.b.Namespace, Entity: e.b.Entity, Resource: e.b.Resource,
				Window: kw, Start: kw.Start(e.at), Shard: e.b.Shard}
			k := u.Key()
			g := index[k]
			if g == nil {
				g = &group{u: u, key: k}
				index[k] = g
				gs = append(gs, g)
			}
			g.members = append(g.members, e)
		}
	}
	return gs
}

// writeSnapshot adds a group's deltas to its snapshot item with one
// conditional update: ADD the sums, SET the high-water mark sq to the last
// record's sequence number, if sq is absent or below the first record's.
// When the condition fails, the returned item's mark says how many of the
// records the item has absorbed already (a prefix: records of one item
// arrive in order); the rest are written again. It returns the records it
// could not apply and why.
func (p *Processor) writeSnapshot(ctx context.Context, g *group, st *Stats) ([]*entry, error) {
	ms := g.members
	for attempt := 0; len(ms) > 0; attempt++ {
		if attempt > len(g.members) {
			return ms, fmt.Errorf("aggregator: snapshot %s: high-water mark keeps moving", g.key)
		}
		in, err := p.snapshotUpdate(g, ms)
		if err != nil {
			return ms, err
		}
		out, err := p.st.Update(ctx, in)
		st.Consumed = st.Consumed.Add(out.Consumed)
		if err == nil {
			st.SnapshotWrites++
			return nil, nil
		}
		var cf *store.ConditionFailedError
		if !errors.As(err, &cf) {
			return ms, err
		}
		mark, ok := cf.Item.Str(keys.AttrUsageSeq)
		if !ok {
			return ms, fmt.Errorf("aggregator: snapshot %s: condition failed but the item has no high-water mark", g.key)
		}
		n := 0
		for n < len(ms) && keys.CompareEncodedSeq(ms[n].seq, mark) <= 0 {
			n++
		}
		if n == 0 {
			return ms, fmt.Errorf("aggregator: snapshot %s: condition failed below its high-water mark %s", g.key, mark)
		}
		st.AlreadyApplied += n
		ms = ms[n:]
	}
	return nil, nil
}

// snapshotUpdate builds the update that adds the deltas of ms to g's
// snapshot.
func (p *Processor) snapshotUpdate(g *group, ms []*entry) (store.UpdateInput, error) {
	type acc struct{ sum, n int64 }
	sums := make(map[string]*acc)
	for _, e := range ms {
		for _, d := range e.deltas {
			a := sums[d.Limit]
			if a == nil {
				a = &acc{}
				sums[d.Limit] = a
			}
			a.sum = bucket.AddSat(a.sum, d.Amount)
			a.n++
		}
	}
	u := store.Update{}
	for _, l := range slices.Sorted(maps.Keys(sums)) {
		u = u.Add(keys.UsageConsumedAttr(l), store.Int(sums[l].sum)).Add(keys.UsageEventsAttr(l), store.Int(sums[l].n))
	}
	w := g.u.Window
	u = u.Set(keys.AttrUsageSeq, store.Str(ms[len(ms)-1].seq)).
		Set(keys.AttrEntity, store.Str(g.u.Entity)).
		Set(keys.AttrResource, store.Str(g.u.Resource)).
		Set(keys.AttrShard, store.Int(int64(g.u.Shard))).
		Set(keys.AttrUsageWindow, store.Str(w.Code())).
		Set(keys.AttrUsageStart, store.Int(g.u.Start.UnixMilli()))
	if ret := p.retention[w]; ret > 0 {
		u = u.Set(store.AttrTTL, store.Int(w.End(g.u.Start).Add(ret).Unix()))
	}
	seq := store.Name(keys.AttrUsageSeq)
	expr, err := store.Build(u, store.Or(seq.NotExists(), seq.LessThan(store.Str(ms[0].seq))))
	return store.UpdateInput{Key: g.key, Expr: expr, ReturnOldOnConditionFailure: true}, err
}
