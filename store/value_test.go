package store_test

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

func TestValueKindIsDynamoDBsTypeDescriptor(t *testing.T) {
	for v, want := range map[store.Value]string{store.Str("x"): "S", store.Int(1): "N", {}: ""} {
		if got := v.Kind(); got != want {
			t.Errorf("%#v.Kind() = %q, want %q", v, got, want)
		}
	}
}

func TestItemKey(t *testing.T) {
	k, ok := store.Item{store.AttrPK: store.Str("p"), store.AttrSK: store.Str("s"), "n": store.Int(1)}.Key()
	if !ok || k != (store.Key{PK: "p", SK: "s"}) {
		t.Fatalf("Key() = %v, %v", k, ok)
	}
	for _, it := range []store.Item{nil, {store.AttrPK: store.Str("p")}, {store.AttrPK: store.Str("p"), store.AttrSK: store.Int(1)}} {
		if _, ok := it.Key(); ok {
			t.Errorf("%v: a key without both key attributes as strings", it)
		}
	}
}
