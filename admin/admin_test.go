package admin

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/items"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Entities and stored limits are listed through their index entries, in
// key order, from a namespace only.
func TestListEntitiesAndLimits(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	other := e.limiter(WithNamespace("other"))
	for _, ent := range []Entity{{ID: "team"}, {ID: "key-2", Parent: "team", Cascade: true}, {ID: "key-1", Parent: "team"}} {
		if err := l.PutEntity(e.ctx, ent); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.PutEntity(e.ctx, Entity{ID: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Scope{{Resource: "gpt-4"}, {Entity: "key-1", Resource: "gpt-4"}, {Entity: "key-1"}, {Entity: "team"}} {
		if err := l.PutLimits(e.ctx, s, rpm(int64(len(s.Entity)+len(s.Resource)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.PutLimits(e.ctx, Scope{Resource: "gpt-4"}, rpm(1)); err != nil {
		t.Fatal(err)
	}

	ents, err := l.ListEntities(e.ctx, "", 0)
	want := []Entity{{ID: "key-1", Parent: "team"}, {ID: "key-2", Parent: "team", Cascade: true}, {ID: "team"}}
	if d := cmp.Diff(want, ents); err != nil || d != "" {
		t.Fatalf("ListEntities: %v (-want +got):\n%s", err, d)
	}
	if ents, err := l.ListEntities(e.ctx, "key-", 1); err != nil || len(ents) != 1 || ents[0].ID != "key-1" {
		t.Fatalf("ListEntities(key-, 1): %+v, %v", ents, err)
	}
	if err := l.DeleteEntity(e.ctx, "key-2"); err != nil {
		t.Fatal(err)
	}
	if ents, err := l.ListEntities(e.ctx, "key-", 0); err != nil || len(ents) != 1 {
		t.Fatalf("after delete: %+v, %v", ents, err)
	}

	got, err := l.ListLimits(e.ctx, "")
	wantLimits := []StoredLimits{
		{Scope{Entity: "key-1"}, rpm(5), ""},
		{Scope{Entity: "key-1", Resource: "gpt-4"}, rpm(10), ""},
		{Scope{Entity: "team"}, rpm(4), ""},
		{Scope{Resource: "gpt-4"}, rpm(5), ""},
	}
	if d := cmp.Diff(wantLimits, got); err != nil || d != "" {
		t.Fatalf("ListLimits: %v (-want +got):\n%s", err, d)
	}

	if got, err := l.ListLimits(e.ctx, "key-1"); err != nil || len(got) != 2 {
		t.Fatalf("ListLimits(key-1): %+v, %v", got, err)
	}
	for _, bad := range []func() error{
		func() error { _, err := l.ListEntities(e.ctx, "a#", 0); return err },
		func() error { _, err := l.ListEntities(e.ctx, "", -1); return err },
	} {
		if err := bad(); !errors.Is(err, limiter.ErrInvalid) {
			t.Errorf("bad listing: %v", err)
		}
	}
}

// A reset deletes every shard item of one bucket (those beyond the shard
// count a stale client created included), leaves other buckets alone, and
// the bucket starts full again.
func TestResetBucket(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	limits := rpm(2)
	e.mustAcquire(l, req("k", limits, one))
	le := e.mustAcquire(l, req("k", limits, one))
	e.mustReject(l, req("k", limits, one))
	other := limiter.Request{Entity: "k", Resource: "gpt-4o", Limits: limits, Consume: one}
	e.mustAcquire(l, other)

	ref := keys.Bucket{Namespace: "ns", Entity: "k", Resource: "gpt-4"}
	for _, from := range []int64{1, 2} {
		if _, err := e.st.Update(e.ctx, keys.DoubleShards(ref, from, keys.LimitsOf(e.st.Peek(ref.Key())))); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []int{1, 3, 5} { // 5: beyond the count, from a stale client
		it := store.Item{store.AttrPK: store.Str(ref.WithShard(s).PK()), store.AttrSK: store.Str(keys.SKBucket)}
		for _, ix := range ref.WithShard(s).IndexAttrs() {
			it[ix.Name] = store.Str(ix.Value)
		}
		if _, err := e.st.Put(e.ctx, store.PutInput{Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	bs, err := l.Buckets(e.ctx, "k", "")
	want := []BucketInfo{
		{Entity: "k", Resource: "gpt-4", Shards: 4, Items: 4, Limits: limits},
		{Entity: "k", Resource: "gpt-4o", Shards: 1, Items: 1, Limits: limits},
	}
	if d := cmp.Diff(want, bs); err != nil || d != "" {
		t.Fatalf("Buckets: %v (-want +got):\n%s", err, d)
	}

	n, err := l.ResetBucket(e.ctx, "k", "gpt-4")
	if err != nil || n != 4 {
		t.Fatalf("ResetBucket = %d, %v; want 4 shards", n, err)
	}
	for s := 0; s < 6; s++ {
		if it := e.st.Peek(ref.WithShard(s).Key()); it != nil {
			t.Errorf("shard %d survived the reset: %v", s, it)
		}
	}
	if bs, err := l.Buckets(e.ctx, "k", "gpt-4"); err != nil || len(bs) != 0 {
		t.Fatalf("Buckets after reset: %+v, %v", bs, err)
	}
	if e.st.Peek(keys.Bucket{Namespace: "ns", Entity: "k", Resource: "gpt-4o"}.Key()) == nil {
		t.Fatal("the reset deleted another resource's bucket")
	}
	// Full again, from a client that knew the bucket (this one forgot it)
	// and from a new one; the old lease's rollback finds nothing to refund.
	if err := le.Rollback(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.mustAcquire(l, req("k", limits, one))
	e.mustAcquire(e.limiter(), req("k", limits, one))
	e.mustReject(l, req("k", limits, one))

	if n, err := l.ResetBucket(e.ctx, "nobody", "gpt-4"); err != nil || n != 0 {
		t.Fatalf("reset of a missing bucket: %d, %v", n, err)
	}
	if _, err := l.ResetBucket(e.ctx, "k", "a#b"); !errors.Is(err, limiter.ErrInvalid) {
		t.Fatalf("bad resource: %v", err)
	}
}

// A bucket of more shard items than one transaction holds is deleted in
// several, the first holding the audit record.
func TestResetBucketManyShards(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("k", rpm(1000), one))
	ref := keys.Bucket{Namespace: "ns", Entity: "k", Resource: "gpt-4"}
	for from := int64(1); from < 256; from *= 2 {
		if _, err := e.st.Update(e.ctx, keys.DoubleShards(ref, from, keys.LimitsOf(e.st.Peek(ref.Key())))); err != nil {
			t.Fatal(err)
		}
	}
	for s := 1; s < 256; s++ {
		if _, err := e.st.Put(e.ctx, store.PutInput{Item: store.Item{store.AttrPK: store.Str(ref.WithShard(s).PK()),
			store.AttrSK: store.Str(keys.SKBucket)}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := l.ResetBucket(e.ctx, "k", "gpt-4"); err != nil || n != 256 {
		t.Fatalf("ResetBucket = %d, %v", n, err)
	}
	if items := e.st.Items(); len(items) != 2 { // the schema version and the audit record
		t.Fatalf("%d items left: %v", len(items), items)
	}
	recs, err := l.Audit(e.ctx, AuditQuery{Entity: "k"})
	if err != nil || len(recs) != 1 || recs[0].Before.Shards != 256 {
		t.Fatalf("audit: %+v, %v", recs, err)
	}
}

// InitTable writes the schema version once and checks it after.
func TestInitTable(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	if _, found, err := l.TableSchemaVersion(e.ctx); err != nil || found {
		t.Fatalf("new table: found %v, %v", found, err)
	}
	if err := l.InitTable(e.ctx); err != nil {
		t.Fatal(err)
	}
	if v, found, err := l.TableSchemaVersion(e.ctx); err != nil || !found || v != SchemaVersion {
		t.Fatalf("after InitTable: %d %v %v", v, found, err)
	}
	if _, err := e.st.Put(e.ctx, store.PutInput{Item: store.Item{store.AttrPK: store.Str(keys.PKSchema),
		store.AttrSK: store.Str(keys.SKVersion), items.AttrVersion: store.Int(99)}}); err != nil {
		t.Fatal(err)
	}
	if err := l.InitTable(e.ctx); !errors.Is(err, limiter.ErrSchemaVersion) {
		t.Fatalf("InitTable on version 99: %v", err)
	}
}
