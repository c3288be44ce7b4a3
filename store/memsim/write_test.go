package memsim_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
	"github.com/shardlimit/limiter/store/storetest"
)

// A Put that only adds an attribute to an item otherwise equal to the
// stored one changes the item: it is stored.
func TestAPutThatAddsAnAttributeIsStored(t *testing.T) {
	s := memsim.New()
	k := key("grow")
	mustPut(t, s, item(k, "a", 1))
	mustPut(t, s, item(k, "a", 1, "b", 2))
	out, err := s.Get(ctx, store.GetInput{Key: k, ConsistentRead: true})
	if err != nil {
		t.Fatal(err)
	}
	wantItem(t, out.Item, item(k, "a", 1, "b", 2))
}

// An update pays for the larger of the item before and after it, in
// started KBs: shrinking a 2 KB item to a few bytes costs 2 WCU, and so
// does growing a few bytes to 2 KB.
func TestAnUpdatePaysForTheLargerItem(t *testing.T) {
	s := memsim.New()
	k := key("size")
	big := store.Str(strings.Repeat("x", 1500))
	mustPut(t, s, item(k, "blob", big))
	out := mustUpdate(t, s, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Remove("blob"), store.Condition{})})
	if out.Consumed.WriteUnits != 2 {
		t.Errorf("shrinking 1.5 KB to a key: %v WCU, want 2", out.Consumed.WriteUnits)
	}
	out = mustUpdate(t, s, store.UpdateInput{Key: k, Expr: storetest.Build(t, store.Update{}.Set("blob", big), store.Condition{})})
	if out.Consumed.WriteUnits != 2 {
		t.Errorf("growing a key to 1.5 KB: %v WCU, want 2", out.Consumed.WriteUnits)
	}
}

// WithSharedResults hands a write's ALL_NEW out as the stored item itself,
// the map the stream record holds too, not a copy of it; by default the
// caller gets a copy of its own.
func TestSharedResultsAreTheStoredItem(t *testing.T) {
	for _, shared := range []bool{false, true} {
		s := memsim.New(memsim.WithSharedResults(shared))
		out := mustUpdate(t, s, store.UpdateInput{Key: key("a"), Return: store.ReturnAllNew,
			Expr: storetest.Build(t, store.Update{}.Add("n", store.Int(1)), store.Condition{})})
		same := reflect.ValueOf(out.Attributes).Pointer() == reflect.ValueOf(s.Stream(0)[0].New).Pointer()
		if same != shared {
			t.Errorf("WithSharedResults(%v): ALL_NEW is the stored map: %v", shared, same)
		}
	}
}

// A ReturnValues that is no ReturnValue at all is DynamoDB's enum error on
// Put and Delete too, not their "set to invalid value".
func TestPutAndDeleteRejectAnUnknownReturnValue(t *testing.T) {
	s := memsim.New()
	k := key("r")
	_, err := s.Put(ctx, store.PutInput{Item: item(k), Return: store.ReturnUpdatedNew + 1})
	wantValidation(t, err, "at 'returnValues' failed to satisfy constraint")
	_, err = s.Delete(ctx, store.DeleteInput{Key: k, Return: store.ReturnUpdatedNew + 1})
	wantValidation(t, err, "at 'returnValues' failed to satisfy constraint")
}

// An update with a condition and no update expression leaves an existing
// item as it is and returns it whole.
func TestAConditionOnlyUpdateKeepsTheItem(t *testing.T) {
	s := memsim.New()
	k := key("c")
	mustPut(t, s, item(k, "a", 1))
	out := mustUpdate(t, s, store.UpdateInput{Key: k, Return: store.ReturnAllNew, Expr: storetest.Build(t, store.Update{}, store.Name("a").Exists())})
	wantItem(t, out.Attributes, item(k, "a", 1))
	wantItem(t, s.Peek(k), item(k, "a", 1))
}
