package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/shardlimit/limiter/store"
)

// Run runs the conformance suite against the stores newStore returns. Each
// call of newStore must return a fresh, empty store with the limiter's
// table layout (see [store.AttrPK]).
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					c.fn(newFixture(t, newStore(t)))
				})
			}
		})
	}
}

// Build is [store.Build] for a test's expressions: it ends the test on an
// error.
func Build(t testing.TB, u store.Update, c store.Condition) store.Expr {
	t.Helper()
	e, err := store.Build(u, c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type testCase struct {
	name string
	fn   func(f *fixture)
}

type group struct {
	name  string
	cases []testCase
}

// groups is the whole suite, in the order it runs.
var groups = []group{
	{"PutGet", putGetCases},
	{"Put", putCases},
	{"Update", updateCases},
	{"Conditions", conditionCases},
	{"Limiter", limiterCases},
	{"Delete", deleteCases},
	{"Validation", validationCases},
	{"TransactWrite", transactCases},
	{"BatchGet", batchGetCases},
	{"Query", queryCases},
	{"Scan", scanCases},
	{"WriteConcurrently", writeConcurrentlyCases},
	{"Concurrency", concurrencyCases},
}

// eventualTimeout bounds how long the suite waits for an eventually
// consistent read to show a write.
const eventualTimeout = 5 * time.Second

// fixture is one store under test and the test using it.
type fixture struct {
	t   *testing.T
	s   store.Store
	ctx context.Context
}

func newFixture(t *testing.T, s store.Store) *fixture {
	if s == nil {
		t.Fatal("newStore returned nil")
	}
	return &fixture{t: t, s: s, ctx: t.Context()}
}

// run runs fn as a subtest sharing f's store.
func (f *fixture) run(name string, fn func(f *fixture)) {
	f.t.Helper()
	f.t.Run(name, func(t *testing.T) {
		fn(&fixture{t: t, s: f.s, ctx: t.Context()})
	})
}

// valueCmp compares store.Values (whose fields are unexported).
var valueCmp = cmp.Comparer(store.Value.Equal)

// diff returns a human-readable difference of two items, or "" when they
// are equal. A nil item and an empty one differ.
func diff(want, got store.Item) string {
	return cmp.Diff(want, got, valueCmp)
}

// key returns the key of a test item: partition "storetest", sort key sk.
func key(sk string) store.Key { return store.Key{PK: "storetest", SK: sk} }

// attrs builds an item from name, value pairs; a value is a store.Value, a
// string, an int or an int64.
func attrs(kv ...any) store.Item {
	if len(kv)%2 != 0 {
		panic("storetest: attrs needs name, value pairs")
	}
	it := make(store.Item, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		it[kv[i].(string)] = val(kv[i+1])
	}
	return it
}

// item builds an item with key k (as the PK and SK attributes) and the
// attributes kv (see attrs).
func item(k store.Key, kv ...any) store.Item {
	it := attrs(kv...)
	it[store.AttrPK] = store.Str(k.PK)
	it[store.AttrSK] = store.Str(k.SK)
	return it
}

func val(v any) store.Value {
	switch v := v.(type) {
	case store.Value:
		return v
	case string:
		return store.Str(v)
	case int:
		return store.Int(int64(v))
	case int64:
		return store.Int(v)
	}
	panic(fmt.Sprintf("storetest: unsupported value %T", v))
}

// with returns a copy of it with the attributes kv set (see attrs).
func with(it store.Item, kv ...any) store.Item {
	c := it.Clone()
	for n, v := range attrs(kv...) {
		c[n] = v
	}
	return c
}

// expr builds an expression with the store's builders.
func (f *fixture) expr(u store.Update, c store.Condition) store.Expr {
	f.t.Helper()
	return Build(f.t, u, c)
}

// put writes it unconditionally.
func (f *fixture) put(it store.Item) store.WriteOutput {
	f.t.Helper()
	out, err := f.s.Put(f.ctx, store.PutInput{Item: it})
	if err != nil {
		f.t.Fatalf("Put(%v): %v", it, err)
	}
	return out
}

// get reads k with a strongly consistent read.
func (f *fixture) get(k store.Key) store.Item {
	f.t.Helper()
	out, err := f.s.Get(f.ctx, store.GetInput{Key: k, ConsistentRead: true})
	if err != nil {
		f.t.Fatalf("Get(%v): %v", k, err)
	}
	return out.Item
}

// update applies u under c to k, failing the test on an error.
func (f *fixture) update(k store.Key, u store.Update, c store.Condition, ret store.ReturnValue) store.WriteOutput {
	f.t.Helper()
	out, err := f.s.Update(f.ctx, store.UpdateInput{Key: k, Expr: f.expr(u, c), Return: ret})
	if err != nil {
		f.t.Fatalf("Update(%v): %v", k, err)
	}
	return out
}

// updateErr applies u under c to k, asking for the old item on condition
// failure, and returns the error.
func (f *fixture) updateErr(k store.Key, u store.Update, c store.Condition) error {
	f.t.Helper()
	_, err := f.s.Update(f.ctx, store.UpdateInput{Key: k, Expr: f.expr(u, c), ReturnOldOnConditionFailure: true})
	return err
}

// expect checks with a consistent read that the item at k is want (nil:
// no item).
func (f *fixture) expect(k store.Key, want store.Item) {
	f.t.Helper()
	if d := diff(want, f.get(k)); d != "" {
		f.t.Errorf("item %v mismatch (-want +got):\n%s", k, d)
	}
}

// expectAttrs checks returned attributes: want nil or empty means none
// (nil or empty accepted).
func expectAttrs(t *testing.T, what string, want, got store.Item) {
	t.Helper()
	if d := cmp.Diff(want, got, valueCmp, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("%s: attributes mismatch (-want +got):\n%s", what, d)
	}
}

// eventually calls check until it returns "" or eventualTimeout passes,
// then fails the test with check's last report. It is for eventually
// consistent reads, which DynamoDB may serve from a replica that has not
// seen the latest write yet.
func (f *fixture) eventually(check func() string) {
	f.t.Helper()
	deadline := time.Now().Add(eventualTimeout)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("after %v: %s", eventualTimeout, msg)
		}
		select {
		case <-f.ctx.Done():
			f.t.Fatalf("%v: %s", f.ctx.Err(), msg)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// expectConditionFailed checks that err is a condition failure whose Item
// is want (nil: no item returned).
func expectConditionFailed(t *testing.T, err error, want store.Item) {
	t.Helper()
	if err == nil {
		t.Fatal("write succeeded, want store.ErrConditionFailed")
	}
	if !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("got error %v (%T), want store.ErrConditionFailed", err, err)
	}
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) {
		t.Fatalf("error %v (%T) matches store.ErrConditionFailed but is not a *store.ConditionFailedError", err, err)
	}
	if d := diff(want, cf.Item); d != "" {
		t.Errorf("ConditionFailedError.Item mismatch (-want +got):\n%s", d)
	}
}

// expectValidation checks that err is a validation error whose message
// contains substr (when not empty).
func expectValidation(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatal("request succeeded, want store.ErrValidation")
	}
	if !errors.Is(err, store.ErrValidation) {
		t.Fatalf("got error %v (%T), want store.ErrValidation", err, err)
	}
	var ve *store.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) matches store.ErrValidation but is not a *store.ValidationError", err, err)
	}
	if substr != "" && !strings.Contains(ve.Message, substr) {
		t.Errorf("validation message %q does not contain %q", ve.Message, substr)
	}
}

// expectWriteUnits checks that a successful small write reported at least
// one write capacity unit.
func expectWriteUnits(t *testing.T, what string, c store.Capacity) {
	t.Helper()
	if c.WriteUnits < 1 {
		t.Errorf("%s: Consumed.WriteUnits = %v, want >= 1", what, c.WriteUnits)
	}
}

// expectReadUnits checks that a read that found items reported read
// capacity.
func expectReadUnits(t *testing.T, what string, c store.Capacity) {
	t.Helper()
	if !(c.ReadUnits > 0) {
		t.Errorf("%s: Consumed.ReadUnits = %v, want > 0", what, c.ReadUnits)
	}
}
