package memsim

import (
	"context"
	"fmt"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// checkSizes verifies the cached item sizes (kept up to date incrementally
// from the attributes an update touched) and the query indexes.
func checkSizes(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, e := range s.items {
		if got := ItemSize(e.item); got != e.size {
			t.Fatalf("item %v: cached size %d, actual %d", k, e.size, got)
		}
		if _, ok := s.byPK[k.PK][k.SK]; !ok {
			t.Fatalf("item %v missing from its partition", k)
		}
		for _, st := range s.indexes {
			pk, _, in := indexKey(e.item, st.ix)
			if _, ok := st.members[pk][k]; in != ok {
				t.Fatalf("item %v: in index %s = %v, membership %v", k, st.ix.Name, in, ok)
			}
		}
	}
	for _, sks := range s.byPK {
		n += len(sks)
	}
	if n != len(s.items) {
		t.Fatalf("%d items, %d in partitions", len(s.items), n)
	}
}

func TestCachedSizes(t *testing.T) {
	s := New(WithPartitionLimits(0, 0))
	ctx := context.Background()
	for i := range 300 {
		k := store.Key{PK: fmt.Sprintf("p%d", i%3), SK: fmt.Sprintf("s%d", i%4)}
		u := store.Update{}.Add(fmt.Sprintf("n%d", i%5), store.Int(int64(i*i-1000))).
			Set(fmt.Sprintf("s%d", i%7), store.Str(fmt.Sprint(i)))
		if i%3 == 0 {
			u = u.Remove(fmt.Sprintf("s%d", (i+1)%7))
		}
		if i%11 == 0 {
			u = u.Set(store.AttrGSI2PK, store.Str("g")).Set(store.AttrGSI2SK, store.Str(fmt.Sprint(i%2)))
		} else if i%13 == 0 {
			u = u.Remove(store.AttrGSI2SK)
		}
		e, err := store.Build(u, store.Condition{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: e}); err != nil {
			t.Fatal(err)
		}
		if i%17 == 0 {
			s.Delete(ctx, store.DeleteInput{Key: k})
		}
		checkSizes(t, s)
	}
}

// BatchGet of a few keys allocates the answer's slice and the items it
// copies, nothing per key beyond them.
func TestBatchGetOfAFewKeysAllocatesOnlyItsAnswer(t *testing.T) {
	s := New(WithPartitionLimits(0, 0), WithStream(false))
	ctx := context.Background()
	in := store.BatchGetInput{ConsistentRead: true}
	for i := range 5 {
		in.Keys = append(in.Keys, store.Key{PK: fmt.Sprint("p", i), SK: "s"})
	}
	if got := testing.AllocsPerRun(100, func() { s.BatchGet(ctx, in) }); got > 1 {
		t.Fatalf("BatchGet of %d missing keys allocates %v times, want 1 (its Items)", len(in.Keys), got)
	}
}

// A table whose items come and go does not keep what they left: deleting
// the last item of a partition forgets the partition, and deleting the
// last item of an index partition forgets the index partition (a
// simulated year of short-lived buckets must not grow the store).
func TestDeletedItemsLeaveNoEmptyPartitions(t *testing.T) {
	s := New(WithPartitionLimits(0, 0))
	ctx := context.Background()
	k := store.Key{PK: "p", SK: "s"}
	it := store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK),
		store.AttrGSI2PK: store.Str("g"), store.AttrGSI2SK: store.Str("x")}
	if _, err := s.Put(ctx, store.PutInput{Item: it}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, store.DeleteInput{Key: k}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byPK) != 0 {
		t.Errorf("partitions after the last delete: %v", s.byPK)
	}
	for _, st := range s.indexes {
		if len(st.members) != 0 {
			t.Errorf("index %s partitions after the last delete: %v", st.ix.Name, st.members)
		}
	}
}
