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
		if got := ItemSize(e.item.copyItem()); got != e.size {
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

// A record of up to 48 words (items of up to three limits) is one
// allocation, its numbers included; larger ones work the same with two.
func TestNewRecordOneAllocation(t *testing.T) {
	for _, names := range []int{1, 20, 29, 30, 45, 46, 80} {
		lay := &layout{index: map[string]int32{}}
		for i := range names {
			lay = lay.extend(fmt.Sprint("a", i))
		}
		want := 1.0
		if len(lay.names)+2*words(len(lay.names)) > 48 {
			want = 2
		}
		if got := testing.AllocsPerRun(100, func() { newRecord(lay) }); got != want {
			t.Errorf("%d names: newRecord allocates %v times, want %v", names, got, want)
		}
		r, shared := newRecord(lay), false
		if len(r.num) != names+2*words(names) || r.Len() != 0 {
			t.Fatalf("%d names: %d words, %d attributes", names, len(r.num), r.Len())
		}
		for i := range names {
			r.set(i, store.Int(int64(i)), true, &shared)
		}
		if got := r.copyItem(); len(got) != names || !got[fmt.Sprint("a", names-1)].Equal(store.Int(int64(names-1))) {
			t.Fatalf("%d names: item %v", names, got)
		}
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

// planMemo finds what was put for a plan, and remembers at most
// maxCarried plans.
func TestPlanMemo(t *testing.T) {
	var m planMemo
	plans := make([]*tplan, maxCarried+1)
	for i := range plans {
		plans[i] = new(tplan)
		m.put(plans[i], []int32{int32(i)})
	}
	for i, pl := range plans {
		f, ok := m.get(pl)
		if i < maxCarried && (!ok || len(f) != 1 || f[0] != int32(i)) {
			t.Fatalf("plan %d: %v, %v", i, f, ok)
		}
		if i == maxCarried && ok {
			t.Fatalf("plan %d beyond the bound remembered", i)
		}
	}
}

// A new view is four allocations; a view with room enough is remade
// with none, every attribute and result absent.
func TestItemViewMake(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { new(itemView).make(20, 6) }); n != 4 {
		t.Fatalf("a new view allocates %v times, want 4", n)
	}
	var v itemView
	v.make(20, 6)
	v.attrs.Kind[19], v.out.Kind[5], v.size[19], v.next[5] = store.KindNumber, store.KindString, 7, 7
	if n := testing.AllocsPerRun(100, func() { v.make(12, 4) }); n != 0 {
		t.Fatalf("remaking a view with room allocates %v times", n)
	}
	v.make(20, 6)
	if len(v.attrs.Kind) != 20 || len(v.out.Kind) != 6 || len(v.size) != 20 || len(v.next) != 6 || v.attrs.Kind[19] != store.KindNone || v.out.Kind[5] != store.KindNone {
		t.Fatalf("remade view not clear: %+v", v)
	}
}

// A nil record (a typed nil in a store.View) holds no attribute, as a nil
// view: the reader says so rather than dereference it.
func TestNumberReaderOfANilRecord(t *testing.T) {
	dst, ok := []int64{7}, []bool{true}
	NewNumberReader("a").Read((*record)(nil), dst, ok)
	if dst[0] != 0 || ok[0] {
		t.Fatalf("read %d, %v from a nil record; want 0, false", dst[0], ok[0])
	}
}

// A nil reader reads nothing; one given shorter slices than its names
// reads as many as they hold.
func TestNumberReaderOfFewerSlotsOrNone(t *testing.T) {
	var nilReader *NumberReader
	nilReader.Read(nil, make([]int64, 1), make([]bool, 1))
	it := store.Item{store.AttrPK: store.Str("k"), store.AttrSK: store.Str("s"), "a": store.Int(1), "b": store.Int(2)}
	r := NewNumberReader("a", "b")
	for _, v := range []store.View{it, nil} {
		dst, ok := []int64{0}, []bool{false, false, false}
		r.Read(v, dst, ok)
		if v != nil && (dst[0] != 1 || !ok[0] || ok[1]) {
			t.Fatalf("read %v %v, want a only: 1, true", dst, ok)
		}
	}
}

// A view whose template has not written the item for more than viewAge
// uses of its views is dropped, not kept up to date by the others' writes;
// when its template writes again the view is made afresh, and its answer
// is the item's.
func TestAViewUnusedForLongIsDropped(t *testing.T) {
	ctx := context.Background()
	s := New(WithViews(true))
	k := store.Key{PK: "p", SK: "s"}
	if _, err := s.Put(ctx, store.PutInput{Item: store.Item{store.AttrPK: store.Str("p"), store.AttrSK: store.Str("s"), "a": store.Int(0), "b": store.Int(0)}}); err != nil {
		t.Fatal(err)
	}
	addA := store.MustCompile(store.Update{}.Add("a", store.Slot(0)), store.Condition{})
	addB := store.MustCompile(store.Update{}.Add("b", store.Slot(0)).Add("a", store.Slot(1)), store.Condition{})
	write := func(tp *store.Template, vals ...int64) store.View {
		t.Helper()
		args := make([]store.Value, len(vals))
		for i, v := range vals {
			args[i] = store.Int(v)
		}
		out, err := s.Update(ctx, store.UpdateInput{Key: k, Expr: tp.Expr(args), Return: store.ReturnAllNew})
		if err != nil {
			t.Fatal(err)
		}
		return out.Image()
	}
	views := func() (n int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, p := range s.items[k].views.plans {
			if p != nil {
				n++
			}
		}
		return n
	}
	write(addA, 1)
	write(addB, 1, 1)
	if n := views(); n != 2 {
		t.Fatalf("%d views after two templates wrote, want 2", n)
	}
	// A was last used at the first of these uses; B's writes are the
	// next ones: at the (viewAge+1)-th use after A's, A is dropped.
	for range viewAge - 1 {
		write(addB, 1, 1)
	}
	if n := views(); n != 2 {
		t.Fatalf("%d views %d uses after A's, want 2 (not yet too old)", n, viewAge)
	}
	write(addB, 1, 1)
	if n := views(); n != 1 {
		t.Fatalf("%d views %d uses after A's, want 1", n, viewAge+1)
	}
	got := write(addA, 10)
	if a, _ := got.Int("a"); a != 1+(viewAge+1)+10 {
		t.Fatalf("a = %d after the dropped view's template wrote again, want %d", a, 1+(viewAge+1)+10)
	}
	if b, _ := got.Int("b"); b != viewAge+1 {
		t.Fatalf("b = %d, want %d", b, viewAge+1)
	}
}
