package sim

import (
	"testing"

	"github.com/shardlimit/limiter/store"
)

// A request applied after its caller was told it timed out keeps the
// values it was sent with, although the caller reuses its buffer of
// expression values for its next write (see store.Store).
func TestDetachedRequestKeepsItsValues(t *testing.T) {
	tmpl := store.MustCompile(store.Update{}.Add("n", store.Slot(0)), store.Name("n").LessThan(store.Slot(1)))
	buf := []store.Value{store.Int(1), store.Int(2)}
	upd := store.UpdateInput{Key: store.Key{PK: "p", SK: "s"}, Expr: tmpl.CompactArgs(buf)}
	q := request{upd: upd, put: store.PutInput{Item: store.Item{"n": store.Int(1)}},
		tx: store.TransactWriteInput{Actions: []store.TransactAction{{Update: &upd}}}}
	want := upd.Expr.ValueMap()
	q.detach()
	buf[0], buf[1] = store.Int(7), store.Int(8) // the caller's next write
	upd.Key.PK = "other"
	if got := q.upd.Expr.ValueMap(); got[":v0"] != want[":v0"] || got[":v1"] != want[":v1"] {
		t.Errorf("the detached update's values = %v, want %v", got, want)
	}
	if got := q.tx.Actions[0].Update; got == &upd || got.Key.PK != "p" || got.Expr.ValueMap()[":v0"] != want[":v0"] {
		t.Errorf("the detached transaction's update = %+v, want its own copy", got)
	}
	if tt, _ := q.upd.Expr.Template(); tt != tmpl {
		t.Errorf("the detached update lost its template form")
	}
}
