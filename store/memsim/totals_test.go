package memsim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
	"github.com/shardlimit/limiter/store/storetest"
)

// Totals count every request once, by kind and outcome: what the simulator
// reports as round trips, throttles, faults and capacity comes from them.
// Each request here meets one outcome: served, a failed condition, a
// malformed request, an injected throttle, a 5xx before or after apply, a
// lost answer, a conflict, or a context already done.
func TestTotalsCountEveryRequestByOutcome(t *testing.T) {
	var next Decision
	st := New(WithFaults(Func("next", func(Op) Decision { d := next; next = Decision{}; return d })))
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	k := store.Key{PK: "p", SK: "s"}
	put := func(c context.Context) error {
		_, err := st.Put(c, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("s"), "n": store.Int(1)}})
		return err
	}
	ops := map[OpKind]func(context.Context) error{
		OpGet: func(c context.Context) error { _, err := st.Get(c, store.GetInput{Key: k}); return err },
		OpBatchGet: func(c context.Context) error {
			_, err := st.BatchGet(c, store.BatchGetInput{Keys: []store.Key{k}})
			return err
		},
		OpPut: put,
		OpUpdate: func(c context.Context) error {
			_, err := st.Update(c, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
			return err
		},
		OpDelete: func(c context.Context) error { _, err := st.Delete(c, store.DeleteInput{Key: k}); return err },
		OpTransactWrite: func(c context.Context) error {
			_, err := st.TransactWrite(c, store.TransactWriteInput{Actions: []store.Write{{Update: &store.UpdateInput{Key: k,
				Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})}}}})
			return err
		},
		OpQuery: func(c context.Context) error { _, err := st.Query(c, store.QueryInput{PartitionKey: "p"}); return err },
	}
	type want struct{ requests, throttles, faults uint64 }
	for kind := OpKind(0); kind < NumOpKinds; kind++ {
		op := ops[kind]
		for _, c := range []struct {
			name string
			d    Decision
			ctx  context.Context
			want want
		}{
			{"served", Decision{}, ctx, want{1, 0, 0}},
			{"throttled", Decision{Fault: FaultThrottle}, ctx, want{1, 1, 0}},
			{"5xx before apply", Decision{Fault: Fault5xxBeforeApply}, ctx, want{1, 0, 1}},
			{"5xx after apply", Decision{Fault: Fault5xxAfterApply}, ctx, want{1, 0, 1}},
			{"lost answer", Decision{Fault: FaultLostResponse}, ctx, want{1, 0, 1}},
			{"context done", Decision{}, done, want{1, 0, 0}},
		} {
			if err := put(ctx); err != nil { // the item every request finds
				t.Fatal(err)
			}
			before := st.Totals()
			next = c.d
			_ = op(c.ctx)
			after := st.Totals()
			o, p := after.Ops[kind], before.Ops[kind]
			got := want{o.Requests - p.Requests, o.Throttles - p.Throttles, o.Faults - p.Faults}
			all := want{after.Requests - before.Requests, after.Throttles - before.Throttles, after.Faults - before.Faults}
			if got != c.want || all != c.want {
				t.Errorf("%s %s: counted %+v (all kinds %+v), want %+v", kind, c.name, got, all, c.want)
			}
			served := c.d.Fault == FaultNone || c.d.Fault == Fault5xxAfterApply || c.d.Fault == FaultLostResponse
			if charged := o.Consumed != p.Consumed; charged != (served && c.ctx == ctx) {
				t.Errorf("%s %s: capacity counted %v, want %v", kind, c.name, charged, served && c.ctx == ctx)
			}
		}
	}

	// Conflicts (single-item writes), failed conditions, malformed requests.
	for _, c := range []struct {
		name string
		kind OpKind
		d    Decision
		run  func() error
		cond uint64
		bad  uint64
	}{
		{"a conflict", OpUpdate, Decision{Fault: FaultConflict}, func() error { return ops[OpUpdate](ctx) }, 0, 0},
		{"a failed condition", OpPut, Decision{}, func() error {
			_, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("s")},
				Expr: storetest.Build(t, store.Update{}, store.Name("PK").NotExists())})
			return err
		}, 1, 0},
		{"a failed condition in a transaction", OpTransactWrite, Decision{}, func() error {
			_, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{Check: &store.CheckInput{Key: k,
				Expr: storetest.Build(t, store.Update{}, store.Name("PK").NotExists())}}}})
			return err
		}, 1, 0},
		{"a malformed update", OpUpdate, Decision{}, func() error {
			_, err := st.Update(ctx, store.UpdateInput{Key: k, Expr: store.Expr{Update: "SET"}})
			return err
		}, 0, 1},
	} {
		before := st.Totals()
		next = c.d
		if err := c.run(); err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		after := st.Totals()
		o, p := after.Ops[c.kind], before.Ops[c.kind]
		faults := uint64(0)
		if c.d.Fault == FaultConflict {
			faults = 1
		}
		if o.Requests-p.Requests != 1 || o.ConditionFailures-p.ConditionFailures != c.cond || after.ConditionFailures-before.ConditionFailures != c.cond ||
			o.ValidationErrors-p.ValidationErrors != c.bad || after.ValidationErrors-before.ValidationErrors != c.bad || o.Faults-p.Faults != faults {
			t.Errorf("%s: %+v -> %+v", c.name, p, o)
		}
	}

	// A key too long for the table is a malformed request of every kind;
	// a partition past its ceiling throttles every kind.
	long := store.Key{PK: "p", SK: string(make([]byte, MaxSortKeySize+1))}
	malformed := map[OpKind]func() error{
		OpGet:      func() error { _, err := st.Get(ctx, store.GetInput{Key: long}); return err },
		OpBatchGet: func() error { _, err := st.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{long}}); return err },
		OpPut: func() error {
			_, err := st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str(long.SK)}})
			return err
		},
		OpUpdate: func() error { _, err := st.Update(ctx, store.UpdateInput{Key: long}); return err },
		OpDelete: func() error { _, err := st.Delete(ctx, store.DeleteInput{Key: long}); return err },
		OpTransactWrite: func() error {
			_, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{Delete: &store.DeleteInput{Key: long}}}})
			return err
		},
		OpQuery: func() error {
			_, err := st.Query(ctx, store.QueryInput{Index: "no-such-index", PartitionKey: "p"})
			return err
		},
	}
	for kind, run := range malformed {
		before := st.Totals()
		if err := run(); err == nil {
			t.Fatalf("%s of a malformed request: no error", kind)
		}
		after := st.Totals()
		if after.Ops[kind].ValidationErrors-before.Ops[kind].ValidationErrors != 1 || after.Ops[kind].Requests-before.Ops[kind].Requests != 1 {
			t.Errorf("%s of a malformed request: %+v -> %+v", kind, before.Ops[kind], after.Ops[kind])
		}
	}
	clock := NewManualClock(time.Unix(1e9, 0))
	hot := New(WithClock(clock), WithPartitionLimits(1, 1))
	st = hot
	for kind := OpKind(0); kind < NumOpKinds; kind++ {
		if err := put(ctx); err != nil && kind == 0 {
			t.Fatal(err)
		}
		throttled := false
		for i := 0; i < 10 && !throttled; i++ {
			before := hot.Totals()
			_ = ops[kind](ctx)
			after := hot.Totals()
			throttled = after.Ops[kind].Throttles > before.Ops[kind].Throttles
			if throttled && (after.Throttles-before.Throttles != 1 || after.Ops[kind].Requests-before.Ops[kind].Requests != 1) {
				t.Errorf("%s throttled: %+v -> %+v", kind, before, after)
			}
		}
		if !throttled {
			t.Errorf("%s: never throttled at 1 unit a second", kind)
		}
		clock.Add(time.Minute)
	}

	// An injected delay counts; a sleeper that gives up counts a fault.
	slept := New(WithFaults(Func("slow", func(Op) Decision { return Decision{Delay: time.Second} })),
		WithSleeper(func(context.Context, time.Duration) error { return context.DeadlineExceeded }))
	if _, err := slept.Get(ctx, store.GetInput{Key: k}); err == nil {
		t.Fatal("a sleeper's error did not end the request")
	}
	if tot := slept.Totals(); tot.InjectedDelay != time.Second || tot.Faults != 1 || tot.Ops[OpGet].Faults != 1 || tot.Requests != 1 {
		t.Fatalf("totals %+v", tot)
	}
}

// Capacity units: one write unit per started KB, one read unit per
// started 4 KB (half for an eventually consistent read).
func TestCapacityUnitsPerStartedBlock(t *testing.T) {
	for _, c := range []struct {
		size int
		w    float64
	}{{0, 1}, {1024, 1}, {1025, 2}, {2048, 2}, {2049, 3}} {
		if got := WriteUnits(c.size); got != c.w {
			t.Errorf("WriteUnits(%d) = %v, want %v", c.size, got, c.w)
		}
	}
	for _, c := range []struct {
		size       int
		consistent bool
		r          float64
	}{{4096, true, 1}, {4097, true, 2}, {4097, false, 1}, {8192, true, 2}, {8193, false, 1.5}, {1, false, 0.5}} {
		if got := ReadUnits(c.size, c.consistent); got != c.r {
			t.Errorf("ReadUnits(%d, %v) = %v, want %v", c.size, c.consistent, got, c.r)
		}
	}
}

// A keys-only index entry is the table's and the index's key attributes,
// each counted once: an item with keys past a KB costs two index write
// units per index it is written to, whatever else it holds.
func TestIndexEntriesOfLongKeys(t *testing.T) {
	st := New()
	pk := string(make([]byte, 700))
	it := store.Item{"PK": store.Str(pk), "SK": store.Str("s"), store.AttrGSI3PK: store.Str(pk), store.AttrGSI3SK: store.Str("x"),
		"big": store.Str(string(make([]byte, 100)))}
	out, err := st.Put(context.Background(), store.PutInput{Item: it})
	if err != nil {
		t.Fatal(err)
	}
	if out.Consumed.IndexWriteUnits != 2 {
		t.Fatalf("index write units %v, want 2 (PK and GSI3PK, 1.4 KB)", out.Consumed.IndexWriteUnits)
	}
	// The same attribute as two keys counts once.
	ix := schema.Index{Name: "same", PartitionKey: "PK", SortKey: "SK", Projection: schema.ProjectKeysOnly}
	if n := st.indexEntrySize(it, ItemSize(it), ix); n != len("PK")+700+len("SK")+1 {
		t.Fatalf("index entry size with the table key as index key: %d", n)
	}
}

// The fault plan's pieces at their edges: names of unknown kinds and
// faults, OnOps for a kind past the known ones, a probability of exactly
// 0 or 1, a storm's window [start, start+length) recurring every `every`,
// and how a single storm prints.
func TestFaultPlanEdges(t *testing.T) {
	if got := NumOpKinds.String(); got != "OpKind(7)" {
		t.Errorf("NumOpKinds.String() = %q", got)
	}
	if got := OpQuery.String(); got != "Query" {
		t.Errorf("OpQuery.String() = %q", got)
	}
	if got := Fault(numFaults).String(); got != "fault(6)" {
		t.Errorf("Fault(6).String() = %q", got)
	}
	if got := FaultConflict.String(); got != "conflict" {
		t.Errorf("FaultConflict.String() = %q", got)
	}
	always := Func("always", func(Op) Decision { return Decision{Fault: FaultThrottle} })
	on := OnOps([]OpKind{OpGet, NumOpKinds}, always)
	if on.Inject(Op{Kind: OpGet}).Fault != FaultThrottle || on.Inject(Op{Kind: OpPut}).Fault != FaultNone || on.Inject(Op{Kind: NumOpKinds}).Fault != FaultNone {
		t.Error("OnOps injects outside its known kinds")
	}
	never, sure := Probability(0, 1, FaultThrottle), Probability(1, 1, FaultThrottle)
	for i := 0; i < 100; i++ {
		if never.Inject(Op{}).Fault != FaultNone || sure.Inject(Op{}).Fault != FaultThrottle {
			t.Fatal("a probability of 0 injected, or one of 1 did not")
		}
	}
	start := Epoch().Add(time.Second)
	s := ThrottleStorm(start, 10*time.Second, 2*time.Second, 1, 1)
	for _, c := range []struct {
		at   time.Duration // after start
		want Fault
	}{{-time.Millisecond, FaultNone}, {0, FaultThrottle}, {2*time.Second - time.Millisecond, FaultThrottle}, {2 * time.Second, FaultNone},
		{10 * time.Second, FaultThrottle}, {12 * time.Second, FaultNone}} {
		if got := s.Inject(Op{Time: start.Add(c.at)}).Fault; got != c.want {
			t.Errorf("storm at start%+v: %v, want %v", c.at, got, c.want)
		}
	}
	once := ThrottleStorm(start, 0, 2*time.Second, 1, 1)
	if once.Inject(Op{Time: start.Add(10 * time.Second)}).Fault != FaultNone {
		t.Error("a single storm came back")
	}
	if got := once.String(); got != "throttle-storm[start=1s once for=2s](p=1 seed=1)" {
		t.Errorf("single storm prints %q", got)
	}
	if got := s.String(); got != "throttle-storm[start=1s every=10s for=2s](p=1 seed=1)" {
		t.Errorf("storm prints %q", got)
	}
}

// A partition's ceiling is a bucket of one second of its rate: full at
// first use, refilled continuously, never above a second's worth; its
// statistics say what it holds now. The writes of one request to one
// partition are one charge (a transaction of two items of a partition
// pays both from one bucket, once or not at all).
func TestPartitionCeilings(t *testing.T) {
	clock := NewManualClock(time.Unix(1e9, 0))
	st := New(WithClock(clock), WithPartitionLimits(3, 5))
	ctx := context.Background()
	item := func(sk string) store.Item { return store.Item{"PK": store.Str("p"), "SK": store.Str(sk)} }
	if got := st.Partition("p").WriteAvailable; got != 3 {
		t.Fatalf("an unused partition holds %v, want a second's worth", got)
	}
	for i := 0; i < 2; i++ {
		if _, err := st.Put(ctx, store.PutInput{Item: item("a")}); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.Partition("p").WriteAvailable; got != 1 {
		t.Fatalf("after 2 writes of 3 a second: %v available, want 1", got)
	}
	clock.Add(500 * time.Millisecond)
	if got := st.Partition("p").WriteAvailable; got != 2.5 {
		t.Fatalf("half a second later: %v available, want 2.5", got)
	}
	clock.Add(time.Hour)
	if got := st.Partition("p").WriteAvailable; got != 3 {
		t.Fatalf("an hour later: %v available, want 3 (a second's worth)", got)
	}
	if got := st.Partition("p").ReadAvailable; got != 5 {
		t.Fatalf("read available %v, want the read ceiling's 5", got)
	}
	if got := New(WithPartitionLimits(0, 0)).Partition("p"); got.ReadAvailable != 0 || got.WriteAvailable != 0 {
		t.Fatalf("available %v/%v without ceilings", got.ReadAvailable, got.WriteAvailable)
	}
	// Two items of the partition in one transaction: 4 units, more than
	// the 3 it holds: throttled, nothing charged.
	txn := store.TransactWriteInput{Actions: []store.Write{{Put: &store.PutInput{Item: item("b")}}, {Put: &store.PutInput{Item: item("c")}}}}
	if _, err := st.TransactWrite(ctx, txn); err == nil {
		t.Fatal("a transaction of 4 units passed a partition holding 3")
	}
	if got := st.Partition("p").WriteAvailable; got != 3 {
		t.Fatalf("after the throttled transaction: %v available, want 3", got)
	}
	if got := st.Partition("p"); got.Throttles != 1 {
		t.Fatalf("partition throttles %d, want 1", got.Throttles)
	}
}

// PartitionConsumed and PartitionThrottles are the Consumed and Throttles
// of Partition: zero before any write, then every write's units, a
// throttled one's none.
func TestPartitionConsumedAndThrottlesArePartitions(t *testing.T) {
	st := New(WithPartitionLimits(2, 5), WithClock(NewManualClock(Epoch())))
	ctx := context.Background()
	if got := st.PartitionConsumed("p"); got != (store.Capacity{}) {
		t.Fatalf("an unused partition consumed %v", got)
	}
	for i := 0; i < 3; i++ { // the third is over the ceiling of 2
		_, _ = st.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("a")}})
		if got, want := st.PartitionConsumed("p"), st.Partition("p").Consumed; got != want {
			t.Fatalf("after %d puts: PartitionConsumed %v, Partition's Consumed %v", i+1, got, want)
		}
	}
	if got := st.PartitionConsumed("p").WriteUnits; got != 2 {
		t.Fatalf("consumed %v write units, want 2 (the throttled put charged none)", got)
	}
	if got, want := st.PartitionThrottles("p"), st.Partition("p").Throttles; got != 1 || want != 1 {
		t.Fatalf("PartitionThrottles %d, Partition's Throttles %d, want 1", got, want)
	}
	if got := st.PartitionThrottles("q"); got != 0 {
		t.Fatalf("an unused partition throttled %d", got)
	}
}

// A throttled read names a read ceiling and the key of the partition that
// was over it (the first key of that partition in the batch).
func TestAThrottledBatchReadNamesItsPartition(t *testing.T) {
	clock := NewManualClock(time.Unix(1e9, 0))
	st := New(WithClock(clock), WithPartitionLimits(0, 1))
	ctx := context.Background()
	cool, hot := store.Key{PK: "cool", SK: "s"}, store.Key{PK: "hot", SK: "t"}
	for i := 0; i < 2; i++ { // two strongly consistent reads: 2 units of the 1 a second
		_, _ = st.Get(ctx, store.GetInput{Key: hot, ConsistentRead: true})
	}
	_, err := st.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{cool, hot, {PK: "hot", SK: "u"}}, ConsistentRead: true})
	var te *store.ThrottledError
	if !errors.As(err, &te) || te.Key != hot || te.Reason != "TableReadKeyRangeThroughputExceeded" {
		t.Fatalf("err %v, want a read throttle on %v", err, hot)
	}
	if got := st.Partition("cool").ReadAvailable; got != 1 {
		t.Fatalf("the cool partition holds %v read units after the throttled batch, want 1 (nothing charged)", got)
	}
}

// An index that projects every attribute writes entries the size of the
// item; a keys-only one, its keys.
func TestIndexEntriesOfAllAttributes(t *testing.T) {
	sc := schema.Default()
	sc.Indexes[0].Projection = schema.ProjectAll // GSI2
	st := New(WithSchema(sc))
	it := store.Item{"PK": store.Str("p"), "SK": store.Str("s"), store.AttrGSI2PK: store.Str("g"), store.AttrGSI2SK: store.Str("h"),
		"big": store.Str(string(make([]byte, 1500)))}
	out, err := st.Put(context.Background(), store.PutInput{Item: it})
	if err != nil {
		t.Fatal(err)
	}
	if out.Consumed.IndexWriteUnits != 2 {
		t.Fatalf("index write units %v, want 2 (the whole 1.5 KB item)", out.Consumed.IndexWriteUnits)
	}
	// An update of another attribute rewrites the entry where it is.
	out, err = st.Update(context.Background(), store.UpdateInput{Key: store.Key{PK: "p", SK: "s"},
		Expr: storetest.Build(t, store.Update{}.Set("n", store.Int(1)), store.Condition{})})
	if err != nil || out.Consumed.IndexWriteUnits != 2 {
		t.Fatalf("an update of another attribute: %v, %v index units; want 2", err, out.Consumed.IndexWriteUnits)
	}
}
