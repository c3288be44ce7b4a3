package admin

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// fast is a delete rate that never waits in tests.
var fast = DeleteNamespaceOptions{WriteUnitsPerSecond: 1e12}

// seedNamespace fills namespace ns with one item or more of every kind,
// through the planes that write them (a limiter, an Admin) and, for the
// kinds the aggregator writes and for extra shards, directly; it returns
// the counts a scan must find.
func (e *env) seedNamespace(ns string, n int) NamespaceInfo {
	e.t.Helper()
	p := e.limiter(WithNamespace(ns), limiter.WithNamespace(ns))
	for i := range n {
		e.clock.Add(time.Second) // under a partition ceiling, each entity's writes in a second of their own
		id := "key-" + strconv.Itoa(i)
		if err := p.PutEntity(e.ctx, Entity{ID: id}); err != nil {
			e.t.Fatal(err)
		}
		if err := p.PutLimits(e.ctx, Scope{Entity: id}, rpm(10)); err != nil {
			e.t.Fatal(err)
		}
		e.mustAcquire(p, req(id, rpm(10), one))
		u := keys.Usage{Namespace: ns, Entity: id, Resource: "gpt-4", Window: keys.WindowHour, Start: t0}
		e.put(u.Key())
	}
	if err := p.PutLimits(e.ctx, Scope{Resource: "gpt-4"}, rpm(5)); err != nil {
		e.t.Fatal(err)
	}
	// A second shard of key-0's bucket, as a doubling writes it.
	e.put(keys.Bucket{Namespace: ns, Entity: "key-0", Resource: "gpt-4", Shard: 1}.Key())
	// Audit: PutEntity and PutLimits per entity, PutLimits of the resource.
	return NamespaceInfo{Name: ns, Items: 6*n + 3, Entities: n, Buckets: n, BucketItems: n + 1, Resources: 1,
		Limits: n + 1, AuditRecords: 2*n + 1, UsageSnapshots: n}
}

func (e *env) put(k store.Key) {
	e.t.Helper()
	if _, err := e.st.Put(e.ctx, store.PutInput{Item: store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK)}}); err != nil {
		e.t.Fatal(err)
	}
}

// itemsOutside returns the items of the table that are not in ns.
func (e *env) itemsOutside(ns string) []store.Item {
	var out []store.Item
	for _, it := range e.st.Items() {
		if pk, _ := it.Str(store.AttrPK); !strings.HasPrefix(pk, ns+"/") {
			out = append(out, it)
		}
	}
	return out
}

func (e *env) admin(ns string) *Admin {
	e.t.Helper()
	a, err := New(e.st, WithNamespace(ns), WithClock(e.clock))
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func TestNamespaceListShowDelete(t *testing.T) {
	e := newEnv(t)
	want := e.seedNamespace("ns", 3)
	other := e.seedNamespace("ns2", 2) // "ns" is a prefix of "ns2"'s name, not of its keys
	a := e.admin("ns")
	if err := a.InitTable(e.ctx); err != nil {
		t.Fatal(err)
	}
	list, err := ListNamespaces(e.ctx, e.st)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]NamespaceInfo{want, other}, list); d != "" {
		t.Fatalf("ListNamespaces (-want +got):\n%s", d)
	}
	got, err := a.Namespace(e.ctx)
	if err != nil || got != want {
		t.Fatalf("Namespace() = %+v, %v; want %+v", got, err, want)
	}
	kept := e.itemsOutside("ns")
	var calls int
	deleted, err := a.DeleteNamespace(e.ctx, DeleteNamespaceOptions{WriteUnitsPerSecond: 1e12, Progress: func(NamespaceInfo) { calls++ }})
	if err != nil || deleted != want {
		t.Fatalf("DeleteNamespace() = %+v, %v; want %+v", deleted, err, want)
	}
	if calls == 0 {
		t.Error("Progress never called")
	}
	if _, err := a.Namespace(e.ctx); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("Namespace() after the delete: %v, want ErrUnknownNamespace", err)
	}
	if d := cmp.Diff(kept, e.st.Items()); d != "" {
		t.Fatalf("items outside the namespace changed (-before +after):\n%s", d)
	}
	list, err = ListNamespaces(e.ctx, e.st)
	if err != nil || len(list) != 1 || list[0] != other {
		t.Fatalf("ListNamespaces after the delete = %+v, %v; want only %+v", list, err, other)
	}
}

// A delete throttled on many of its writes, by injected faults and by the
// partition ceiling of the namespace's configuration index (10 write units
// a second here), and interrupted (its context cancelled), leaves part of
// the namespace; run again, it finishes. Its backoffs sleep on the manual
// clock, so the ceiling refills without wall time.
func TestNamespaceDeleteThrottledInterruptedResumed(t *testing.T) {
	throttles := memsim.OnOps([]memsim.OpKind{memsim.OpDelete}, memsim.Probability(0.3, 7, memsim.FaultThrottle))
	e := newEnv(t, memsim.WithFaults(throttles), memsim.WithPartitionLimits(10, 0))
	seeded := e.seedNamespace("ns", 40)
	e.seedNamespace("other", 2)
	kept := e.itemsOutside("ns")
	a := e.admin("ns")

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	opts := fast
	opts.Progress = func(d NamespaceInfo) {
		if d.Items >= 60 {
			cancel()
		}
	}
	first, err := a.DeleteNamespace(ctx, opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted DeleteNamespace: %v, want context.Canceled", err)
	}
	if first.Items < 60 || first.Items >= seeded.Items {
		t.Fatalf("interrupted DeleteNamespace deleted %d items, want at least 60 and fewer than %d", first.Items, seeded.Items)
	}
	left, err := a.Namespace(e.ctx)
	if err != nil || left.Items != seeded.Items-first.Items {
		t.Fatalf("after the interruption: %+v, %v; want %d items left", left, err, seeded.Items-first.Items)
	}
	second, err := a.DeleteNamespace(e.ctx, fast)
	if err != nil || second.Items != left.Items {
		t.Fatalf("resumed DeleteNamespace = %+v, %v; want %d items deleted", second, err, left.Items)
	}
	if _, err := a.Namespace(e.ctx); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("Namespace() after the resumed delete: %v, want ErrUnknownNamespace", err)
	}
	if e.st.Totals().Throttles == 0 || e.st.IndexPartition(store.IndexGSI3, keys.ConfigIndexPK("ns")).Throttles == 0 {
		t.Errorf("throttles: %d, %d at the ceiling: the test proves nothing about backing off",
			e.st.Totals().Throttles, e.st.IndexPartition(store.IndexGSI3, keys.ConfigIndexPK("ns")).Throttles)
	}
	if d := cmp.Diff(kept, e.st.Items()); d != "" {
		t.Fatalf("items outside the namespace changed (-before +after):\n%s", d)
	}
}

// Bad input gets an error naming the field and changes nothing.
func TestNamespaceBadInput(t *testing.T) {
	e := newEnv(t)
	e.seedNamespace("ns", 1)
	before := e.st.Items()
	writes := func() uint64 {
		var n uint64
		for k, o := range e.st.Totals().Ops {
			if memsim.OpKind(k).IsWrite() {
				n += o.Requests
			}
		}
		return n
	}
	w0 := writes()
	if _, err := New(e.st, WithNamespace("")); !isField(err, "Namespace") {
		t.Errorf(`New(WithNamespace("")): %v, want a validation error on Namespace`, err)
	}
	if _, err := New(e.st, WithNamespace("a/b")); !isField(err, "Namespace") {
		t.Errorf(`New(WithNamespace("a/b")): %v, want a validation error on Namespace`, err)
	}
	unknown := e.admin("nobody")
	if _, err := unknown.DeleteNamespace(e.ctx, fast); !errors.Is(err, ErrUnknownNamespace) || !strings.Contains(err.Error(), `"nobody"`) {
		t.Errorf("DeleteNamespace of an unknown namespace: %v, want ErrUnknownNamespace naming it", err)
	}
	if _, err := unknown.Namespace(e.ctx); !errors.Is(err, ErrUnknownNamespace) {
		t.Errorf("Namespace of an unknown namespace: %v, want ErrUnknownNamespace", err)
	}
	if _, err := e.admin("ns").DeleteNamespace(e.ctx, DeleteNamespaceOptions{WriteUnitsPerSecond: -1}); !isField(err, "WriteUnitsPerSecond") {
		t.Errorf("DeleteNamespace with a negative rate: %v, want a validation error on WriteUnitsPerSecond", err)
	}
	var nilAdmin *Admin
	if _, err := nilAdmin.DeleteNamespace(e.ctx, fast); !isField(err, "Admin") {
		t.Errorf("DeleteNamespace on a nil Admin: %v", err)
	}
	if _, err := nilAdmin.Namespace(e.ctx); !isField(err, "Admin") {
		t.Errorf("Namespace on a nil Admin: %v", err)
	}
	var nilCtx context.Context
	if _, err := e.admin("ns").DeleteNamespace(nilCtx, fast); !isField(err, "ctx") {
		t.Errorf("DeleteNamespace(nil ctx): %v", err)
	}
	if _, err := ListNamespaces(nilCtx, e.st); !isField(err, "ctx") {
		t.Errorf("ListNamespaces(nil ctx): %v", err)
	}
	if _, err := ListNamespaces(e.ctx, nil); !isField(err, "store") {
		t.Errorf("ListNamespaces(nil store): %v", err)
	}
	if w := writes(); w != w0 {
		t.Errorf("bad input wrote %d requests", w-w0)
	}
	if d := cmp.Diff(before, e.st.Items()); d != "" {
		t.Fatalf("bad input changed the table (-before +after):\n%s", d)
	}
}

func isField(err error, field string) bool {
	var v *limiter.ValidationError
	return errors.As(err, &v) && v.Field == field
}

// The deletes are paced: at 50 write units a second, on the Admin's
// manual clock, deleting what costs W write units takes W/50 seconds.
func TestNamespaceDeleteIsPaced(t *testing.T) {
	e := newEnv(t)
	e.seedNamespace("ns", 10)
	start, before := e.clock.Now(), e.st.Totals().Consumed.WriteUnits
	if _, err := e.admin("ns").DeleteNamespace(e.ctx, DeleteNamespaceOptions{WriteUnitsPerSecond: 50}); err != nil {
		t.Fatal(err)
	}
	spent := e.st.Totals().Consumed.WriteUnits - before
	if took, least := e.clock.Now().Sub(start), time.Duration(spent/50*float64(time.Second)); took < least || spent < 60 {
		t.Fatalf("deleting %.0f write units at 50 a second took %v on the clock, want at least %v", spent, took, least)
	}
}
