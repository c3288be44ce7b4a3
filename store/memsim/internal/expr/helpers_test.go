package expr

import (
	"errors"
	"testing"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/internal/schema"
)

type names = map[string]string
type values = map[string]store.Value

var (
	S = store.Str
	N = store.Int
)

// isKey is the limiter table's key schema.
var isKey = schema.Default().IsKeyAttribute

var testKey = store.Item{"PK": S("p"), "SK": S("s")}

// wantMessage fails unless err is a *store.ValidationError with message msg.
func wantMessage(t *testing.T, err error, msg string) {
	t.Helper()
	var ve *store.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got error %v (%T), want ValidationError %q", err, err, msg)
	}
	if !errors.Is(err, store.ErrValidation) {
		t.Fatalf("error does not match store.ErrValidation")
	}
	if ve.Message != msg {
		t.Fatalf("message:\n got %q\nwant %q", ve.Message, msg)
	}
}

// bind parses and binds, failing the test on any error.
func bind(t *testing.T, update, cond string, n names, v values) *Bound {
	t.Helper()
	p, err := Parse(update, cond)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", update, cond, err)
	}
	b, err := p.Bind(n, v, isKey)
	if err != nil {
		t.Fatalf("Bind(%q, %q): %v", update, cond, err)
	}
	return b
}

// firstError returns the first error of Parse, then Bind.
func firstError(update, cond string, n names, v values) error {
	p, err := Parse(update, cond)
	if err != nil {
		return err
	}
	_, err = p.Bind(n, v, isKey)
	return err
}

func item(kv ...any) store.Item {
	it := store.Item{}
	for i := 0; i < len(kv); i += 2 {
		it[kv[i].(string)] = kv[i+1].(store.Value)
	}
	return it
}

func sameItem(a, b store.Item) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// buildParsed builds u and c with store.Build and parses the result,
// failing the test on any error.
func buildParsed(t *testing.T, u store.Update, c store.Condition) (store.Expr, *Parsed) {
	t.Helper()
	e, err := store.Build(u, c)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(e.Update, e.Condition)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", e.Update, e.Condition, err)
	}
	return e, p
}
