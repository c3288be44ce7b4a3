package admin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// Every configuration change writes one audit record, newest first per
// entity (or per resource for a resource's limits), with who, what, before
// and after; a call that changes nothing records nothing.
func TestAuditRecordsEveryChange(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	ctx := ContextWithPrincipal(e.ctx, "alice")
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		e.clock.Add(time.Second)
	}
	step("parent", l.PutEntity(ctx, Entity{ID: "p"}))
	step("create", l.PutEntity(ctx, Entity{ID: "k"}))
	step("same again", l.PutEntity(ctx, Entity{ID: "k"})) // no change: no record
	step("set parent", l.PutEntity(ctx, Entity{ID: "k", Parent: "p", Cascade: true}))
	step("entity limits", l.PutLimits(ctx, Scope{Entity: "k"}, rpm(10)))
	step("entity limits again", l.PutLimits(ctx, Scope{Entity: "k"}, rpm(10)))
	step("entity+resource limits", l.PutLimits(ctx, Scope{Entity: "k", Resource: "gpt-4"}, rpm(5)))
	step("resource limits", l.PutLimits(ctx, Scope{Resource: "gpt-4"}, rpm(7)))
	step("delete entity+resource limits", l.DeleteLimits(ctx, Scope{Entity: "k", Resource: "gpt-4"}))
	step("delete missing limits", l.DeleteLimits(ctx, Scope{Entity: "k", Resource: "gpt-4"}))
	e.mustAcquire(l, req("k", rpm(99), one))
	_, err := l.ResetBucket(ctx, "k", "gpt-4")
	step("reset", err)
	step("delete entity", l.DeleteEntity(ctx, "k"))
	step("delete missing entity", l.DeleteEntity(ctx, "k"))

	recs, err := l.Audit(e.ctx, AuditQuery{Entity: "k"})
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	k, kr := Scope{Entity: "k"}, Scope{Entity: "k", Resource: "gpt-4"}
	want := []AuditRecord{
		{At: at(11), Principal: "alice", Action: AuditDeleteEntity, Scope: k, Before: &AuditState{Parent: "p", Cascade: true}},
		{At: at(10), Principal: "alice", Action: AuditResetBucket, Scope: kr, Before: &AuditState{Shards: 1}},
		{At: at(8), Principal: "alice", Action: AuditDeleteLimits, Scope: kr, Before: &AuditState{Limits: rpm(5)}},
		{At: at(6), Principal: "alice", Action: AuditPutLimits, Scope: kr, After: &AuditState{Limits: rpm(5)}},
		{At: at(4), Principal: "alice", Action: AuditPutLimits, Scope: k, After: &AuditState{Limits: rpm(10)}},
		{At: at(3), Principal: "alice", Action: AuditPutEntity, Scope: k, Before: &AuditState{}, After: &AuditState{Parent: "p", Cascade: true}},
		{At: at(1), Principal: "alice", Action: AuditPutEntity, Scope: k, After: &AuditState{}},
	}
	if d := cmp.Diff(want, recs); d != "" {
		t.Fatalf("entity k's audit records (-want +got):\n%s", d)
	}
	recs, err = l.Audit(e.ctx, AuditQuery{Resource: "gpt-4"})
	if err != nil || len(recs) != 1 || recs[0].Action != AuditPutLimits || recs[0].Scope != (Scope{Resource: "gpt-4"}) {
		t.Fatalf("resource records: %+v, %v", recs, err)
	}
	recs, err = l.Audit(e.ctx, AuditQuery{Entity: "k", Resource: "gpt-4", Limit: 2})
	if err != nil || len(recs) != 2 || recs[0].Action != AuditResetBucket || recs[1].Action != AuditDeleteLimits {
		t.Fatalf("entity k on gpt-4, 2 newest: %+v, %v", recs, err)
	}
	recs, err = l.Audit(e.ctx, AuditQuery{Entity: "k", Limit: 1})
	if err != nil || len(recs) != 1 || recs[0].Action != AuditDeleteEntity {
		t.Fatalf("newest record: %+v, %v", recs, err)
	}
}

// The change and its record are one transaction: a configuration write
// issues no single-item write, and a transaction that fails leaves
// neither.
func TestAuditInTheSameTransaction(t *testing.T) {
	var ops []memsim.OpKind
	e := newEnv(t, memsim.WithHook(func(_ context.Context, op memsim.Op) { ops = append(ops, op.Kind) }))
	l := e.limiter()
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"PutEntity", func() error { return l.PutEntity(e.ctx, Entity{ID: "k"}) }},
		{"PutLimits", func() error { return l.PutLimits(e.ctx, Scope{Entity: "k"}, rpm(3)) }},
		{"DeleteLimits", func() error { return l.DeleteLimits(e.ctx, Scope{Entity: "k"}) }},
		{"DeleteEntity", func() error { return l.DeleteEntity(e.ctx, "k") }},
	} {
		name, change := c.name, c.change
		ops = nil
		if err := change(); err != nil {
			t.Fatal(name, err)
		}
		writes := 0
		for _, k := range ops {
			if k.IsWrite() {
				writes++
				if k != memsim.OpTransactWrite {
					t.Errorf("%s issued a %v outside the transaction", name, k)
				}
			}
		}
		if writes != 1 {
			t.Errorf("%s: %d writes (%v), want one transaction", name, writes, ops)
		}
	}

	// A transaction the store refuses changes nothing and records nothing.
	f := newEnv(t, memsim.WithFaults(memsim.Func("refuse transactions", func(op memsim.Op) memsim.Decision {
		if op.Kind == memsim.OpTransactWrite {
			return memsim.Decision{Fault: memsim.Fault5xxBeforeApply}
		}
		return memsim.Decision{}
	})))
	fl := f.limiter()
	if err := fl.PutLimits(f.ctx, Scope{Entity: "k"}, rpm(3)); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("PutLimits on a failing store: %v, want limiter.ErrUnavailable", err)
	}
	if n := f.st.Len(); n != 0 {
		t.Fatalf("%d items after a failed change, want 0: %v", n, f.st.Items())
	}
}

// Two writers race: the loser's record names what the winner wrote as its
// Before, so the trail reads as a chain.
func TestAuditBeforeIsExactUnderRaces(t *testing.T) {
	var e *env
	var rival *both
	raced := false
	e = newEnv(t, memsim.WithHook(func(ctx context.Context, op memsim.Op) {
		if op.Kind == memsim.OpTransactWrite && !raced && rival != nil {
			raced = true
			if err := rival.PutLimits(ContextWithPrincipal(ctx, "bob"), Scope{Entity: "k"}, rpm(2)); err != nil {
				t.Error(err)
			}
		}
	}))
	l := e.limiter()
	if err := l.PutLimits(e.ctx, Scope{Entity: "k"}, rpm(1)); err != nil {
		t.Fatal(err)
	}
	rival = e.limiter()
	if err := l.PutLimits(ContextWithPrincipal(e.ctx, "alice"), Scope{Entity: "k"}, rpm(3)); err != nil {
		t.Fatal(err)
	}
	recs, err := l.Audit(e.ctx, AuditQuery{Entity: "k"})
	if err != nil || len(recs) != 3 {
		t.Fatalf("records %+v, %v", recs, err)
	}
	if recs[0].Principal != "alice" || recs[0].Before.Limits[0].Capacity != 2 || recs[0].After.Limits[0].Capacity != 3 ||
		recs[1].Principal != "bob" || recs[1].Before.Limits[0].Capacity != 1 || recs[1].After.Limits[0].Capacity != 2 {
		t.Fatalf("records do not chain: %+v then %+v", recs[0], recs[1])
	}
}

// The principal comes from the context, else the option, else the
// environment; a bad one is refused before any write.
func TestAuditPrincipal(t *testing.T) {
	e := newEnv(t)
	t.Setenv(PrincipalEnv, "from-env")
	t.Setenv("USER", "user")
	principal := func(l *both, ctx context.Context) string {
		t.Helper()
		p, err := l.principalOf(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	l := e.limiter()
	if p := principal(l, e.ctx); p != "from-env" {
		t.Errorf("env: %q", p)
	}
	t.Setenv(PrincipalEnv, "")
	if p := principal(l, e.ctx); p != "user" {
		t.Errorf("USER: %q", p)
	}
	t.Setenv("USER", "")
	if p := principal(l, e.ctx); p != "unknown" {
		t.Errorf("nothing set: %q", p)
	}
	o := e.limiter(WithDefaultPrincipal("svc"))
	if p := principal(o, e.ctx); p != "svc" {
		t.Errorf("option: %q", p)
	}
	if p := principal(o, ContextWithPrincipal(e.ctx, "ctx")); p != "ctx" {
		t.Errorf("context: %q", p)
	}
	for _, bad := range []string{"a\nb", strings.Repeat("x", 257), "\xff"} {
		err := l.PutEntity(ContextWithPrincipal(e.ctx, bad), Entity{ID: "k"})
		var ve *limiter.ValidationError
		if !errors.As(err, &ve) || ve.Field != "principal" {
			t.Errorf("principal %q: %v, want a validation error on principal", bad, err)
		}
	}
	if e.st.Len() != 0 {
		t.Fatalf("a refused principal wrote %d items", e.st.Len())
	}
}

// Audit records expire after the retention (time to live), or never.
func TestAuditRetention(t *testing.T) {
	ttlOf := func(opts ...any) (int64, bool) {
		e := newEnv(t)
		l := e.limiter(opts...)
		if err := l.PutEntity(e.ctx, Entity{ID: "k"}); err != nil {
			t.Fatal(err)
		}
		out, err := e.st.Query(e.ctx, store.QueryInput{PartitionKey: keys.AuditPK("ns", "k", "")})
		if err != nil || len(out.Items) != 1 {
			t.Fatalf("audit items: %v, %v", out.Items, err)
		}
		return out.Items[0].Int(store.AttrTTL)
	}
	if ttl, ok := ttlOf(); !ok || ttl != t0.Add(DefaultAuditRetention).Unix() {
		t.Errorf("default ttl %d %v, want 90 days after the change", ttl, ok)
	}
	if ttl, ok := ttlOf(WithAuditRetention(time.Hour)); !ok || ttl != t0.Add(time.Hour).Unix() {
		t.Errorf("1h ttl %d %v", ttl, ok)
	}
	if _, ok := ttlOf(WithAuditRetention(0)); ok {
		t.Error("retention 0 set a ttl")
	}
	if _, err := New(memsim.New(), WithAuditRetention(-time.Second)); !errors.Is(err, limiter.ErrInvalid) {
		t.Errorf("negative retention: %v", err)
	}
}

func TestAuditQueryValidation(t *testing.T) {
	l := newEnv(t).limiter()
	for _, q := range []AuditQuery{{}, {Entity: "a#b"}, {Resource: "r#"}, {Entity: "k", Limit: -1}, {Entity: "k", Limit: 1001}} {
		if _, err := l.Audit(context.Background(), q); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("Audit(%+v) = %v, want a validation error", q, err)
		}
	}
}

// What a configuration change costs (docs/dynamodb.md): the read of the
// item, then the item and its record written transactionally (2 WCU each
// per KB), plus the index entry of a new item; nothing but the read when
// nothing changes.
func TestConfigurationChangeCost(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	cost := func(change func() error) store.Capacity {
		t.Helper()
		before := e.st.Totals().Consumed
		if err := change(); err != nil {
			t.Fatal(err)
		}
		after := e.st.Totals().Consumed
		return store.Capacity{ReadUnits: after.ReadUnits - before.ReadUnits, WriteUnits: after.WriteUnits - before.WriteUnits,
			IndexWriteUnits: after.IndexWriteUnits - before.IndexWriteUnits}
	}
	put := func(n int64) func() error {
		return func() error { return l.PutLimits(e.ctx, Scope{Entity: "k"}, rpm(n)) }
	}
	for _, c := range []struct {
		name   string
		change func() error
		want   store.Capacity
	}{
		{"create", put(5), store.Capacity{ReadUnits: 1, WriteUnits: 5, IndexWriteUnits: 1}},
		{"change", put(6), store.Capacity{ReadUnits: 1, WriteUnits: 4}},
		{"same again", put(6), store.Capacity{ReadUnits: 1}},
		{"delete", func() error { return l.DeleteLimits(e.ctx, Scope{Entity: "k"}) }, store.Capacity{ReadUnits: 1, WriteUnits: 5, IndexWriteUnits: 1}},
	} {
		if got := cost(c.change); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
