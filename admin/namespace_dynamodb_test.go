package admin_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/dynamotest"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/dynamo"
)

// bigNamespaceItems is the size of the namespace TestDeleteNamespaceOnDynamoDBLocal
// deletes: 1,000 by default, 10,000 with ADMIN_BIG_NAMESPACE=1 (about a
// minute more on a busy machine).
func bigNamespaceItems() int {
	if os.Getenv("ADMIN_BIG_NAMESPACE") != "" {
		return 10_000
	}
	return 1_000
}

// namespaceItems returns n keys of namespace ns, of every kind: bucket
// shards (with their index keys), entities, stored limits, audit records,
// usage snapshots.
func namespaceItems(ns string, n int) []store.Item {
	var its []store.Item
	for i := 0; len(its) < n; i++ {
		e := "key-" + strconv.Itoa(i)
		b := keys.Bucket{Namespace: ns, Entity: e, Resource: "gpt-4"}
		for s := range 2 {
			it := item(b.WithShard(s).Key())
			for _, a := range b.WithShard(s).IndexAttrs() {
				it[a.Name] = store.Str(a.Value)
			}
			its = append(its, it)
		}
		its = append(its, item(keys.Entity(ns, e)), item(keys.EntityLimits(ns, e, keys.AnyResource)),
			item(store.Key{PK: keys.AuditPK(ns, e, ""), SK: keys.AuditSK(time.Unix(int64(i), 0), 1)}),
			item(keys.Usage{Namespace: ns, Entity: e, Resource: "gpt-4", Window: keys.WindowHour, Start: time.Unix(0, 0).UTC()}.Key()))
	}
	return its[:n]
}

func item(k store.Key) store.Item {
	return store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK), "n": store.Int(1)}
}

func putAll(t *testing.T, st store.Store, its []store.Item) {
	t.Helper()
	for first := 0; first < len(its); first += 25 {
		var ws []store.Write
		for _, it := range its[first:min(first+25, len(its))] {
			ws = append(ws, store.Write{Put: &store.PutInput{Item: it}})
		}
		for _, r := range st.WriteConcurrently(context.Background(), ws) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
}

// A namespace of 1,000 items (10,000 with ADMIN_BIG_NAMESPACE=1) deleted
// on a real server, beside a namespace whose items stay.
func TestDeleteNamespaceOnDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	st := dynamo.New(srv.Client, srv.NewTable(t))
	ctx := context.Background()
	n := bigNamespaceItems()
	putAll(t, st, namespaceItems("big", n))
	kept := namespaceItems("keep", 60)
	putAll(t, st, kept)

	adm, err := admin.New(st, admin.WithNamespace("big"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := adm.Namespace(ctx)
	if err != nil || info.Items != n {
		t.Fatalf("Namespace() = %+v, %v; want %d items", info, err, n)
	}
	deleted, err := adm.DeleteNamespace(ctx, admin.DeleteNamespaceOptions{WriteUnitsPerSecond: 100_000})
	if err != nil || deleted != info {
		t.Fatalf("DeleteNamespace() = %+v, %v; want %+v", deleted, err, info)
	}
	if _, err := adm.Namespace(ctx); !errors.Is(err, admin.ErrUnknownNamespace) {
		t.Fatalf("Namespace() after the delete: %v, want ErrUnknownNamespace", err)
	}
	list, err := admin.ListNamespaces(ctx, st)
	if err != nil || len(list) != 1 || list[0].Name != "keep" || list[0].Items != len(kept) {
		t.Fatalf("ListNamespaces() = %+v, %v; want only keep with %d items", list, err, len(kept))
	}
	for first := 0; first < len(kept); first += 100 {
		var ks []store.Key
		for _, it := range kept[first:min(first+100, len(kept))] {
			k, _ := it.Key()
			ks = append(ks, k)
		}
		out, err := st.BatchGet(ctx, store.BatchGetInput{Keys: ks, ConsistentRead: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range out.Items {
			if it == nil {
				t.Fatalf("item %v of namespace keep is gone", ks[i])
			}
		}
	}
}
