package memsim_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

var ctx = context.Background()

// valueCmp lets cmp compare store.Values (unexported fields).
var valueCmp = cmp.Comparer(store.Value.Equal)

func key(pk string) store.Key { return store.Key{PK: pk, SK: "#STATE"} }

func item(k store.Key, kv ...any) store.Item {
	it := store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK)}
	for i := 0; i < len(kv); i += 2 {
		name := kv[i].(string)
		switch v := kv[i+1].(type) {
		case string:
			it[name] = store.Str(v)
		case int:
			it[name] = store.Int(int64(v))
		case int64:
			it[name] = store.Int(v)
		case store.Value:
			it[name] = v
		default:
			panic("item: bad value")
		}
	}
	return it
}

func mustPut(t testing.TB, s *memsim.Store, it store.Item) store.WriteOutput {
	t.Helper()
	out, err := s.Put(ctx, store.PutInput{Item: it})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return out
}

func mustUpdate(t testing.TB, s *memsim.Store, in store.UpdateInput) store.WriteOutput {
	t.Helper()
	out, err := s.Update(ctx, in)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return out
}

func wantItem(t testing.TB, got, want store.Item) {
	t.Helper()
	if diff := cmp.Diff(want, got, valueCmp); diff != "" {
		t.Fatalf("item mismatch (-want +got):\n%s", diff)
	}
}

// wantValidation fails unless err is a *store.ValidationError whose message
// contains each of subs.
func wantValidation(t testing.TB, err error, subs ...string) {
	t.Helper()
	var ve *store.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, store.ErrValidation) {
		t.Fatalf("err = %v (%T), want *store.ValidationError", err, err)
	}
	for _, sub := range subs {
		if !strings.Contains(ve.Message, sub) {
			t.Fatalf("validation message %q does not contain %q", ve.Message, sub)
		}
	}
}

func wantCondFailed(t testing.TB, err error) *store.ConditionFailedError {
	t.Helper()
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) || !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("err = %v (%T), want *store.ConditionFailedError", err, err)
	}
	return cf
}

// unchanged fails if the store's items differ from before.
func unchanged(t testing.TB, s *memsim.Store, before []store.Item) {
	t.Helper()
	if diff := cmp.Diff(before, s.Items(), valueCmp); diff != "" {
		t.Fatalf("store changed (-before +after):\n%s", diff)
	}
}
