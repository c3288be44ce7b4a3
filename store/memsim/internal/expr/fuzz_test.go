package expr

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/shardlimit/limiter/store"
)

// FuzzParse checks that no input makes the engine panic or return an error
// that is not a *store.ValidationError, from Parse through Apply.
func FuzzParse(f *testing.F) {
	for _, s := range [][2]string{
		{"SET a = :v", ""},
		{"SET #a0 = :v0, #a1 = if_not_exists(#a1, :v1), #a2 = if_not_exists(#a2, :v2) + :v3 REMOVE #a3 ADD #a4 :v4",
			"(attribute_exists(#a5)) AND ((#a0 = :v5) OR (NOT (#a4 < :v6))) AND (begins_with(#a6, :v7))"},
		{"SET a = ((b))", "((a = :v))"},
		{"SET a.b[1].#c = list_append(if_not_exists(a, :l), :m)", "size(a.b) BETWEEN :x AND :y"},
		{"REMOVE a, b.c DELETE d :s ADD e :n", "a IN (:a, :b, c) OR NOT contains(d, :s)"},
		{"set a=set", "a > between"},
		{"SET a[99999999999] = :v", "((f(x)))"},
		{"SET x = y + :one, s = s + :one", "attribute_type(a, :t)"},
		{"\xff\x00(", ")(ü"},
		{"SET " + "a." + "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a = :v", "a = a"},
	} {
		f.Add(s[0], s[1])
	}
	isKey := func(n string) bool { return n == "PK" }
	attrNames := []string{"a", "PK", "b", "x.y", "", "ttl"}
	items := []store.Item{
		nil,
		{"PK": store.Str("p")},
		{"PK": store.Str("p"), "a": store.Int(math.MaxInt64), "b": store.Str("bb"), "x.y": store.Int(-1)},
	}
	f.Fuzz(func(t *testing.T, update, cond string) {
		p, err := Parse(update, cond)
		if err != nil {
			checkValidation(t, err)
			return
		}
		for variant := 0; variant < 3; variant++ {
			var names map[string]string
			var vals map[string]store.Value
			if len(p.names) > 0 || variant == 2 {
				names = map[string]string{}
				for i, ph := range p.names {
					names[ph] = attrNames[(i+variant)%len(attrNames)]
				}
			}
			if len(p.values) > 0 || variant == 2 {
				vals = map[string]store.Value{}
				for i, ph := range p.values {
					switch (i + variant) % 4 {
					case 0:
						vals[ph] = store.Int(int64(i))
					case 1:
						vals[ph] = store.Str("S")
					case 2:
						vals[ph] = store.Int(math.MinInt64)
					default:
						vals[ph] = store.Str("v" + strconv.Itoa(i))
					}
				}
			}
			if variant == 1 {
				delete(names, "#a")
				delete(vals, ":v")
			}
			b, err := p.Bind(names, vals, isKey)
			// The memo of an earlier success must not change the outcome:
			// a fresh Parsed has none.
			fresh, _ := Parse(update, cond)
			_, err2 := fresh.Bind(names, vals, isKey)
			if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() {
				t.Fatalf("memoized Bind: %v; fresh Bind: %v", err, err2)
			}
			if err != nil {
				checkValidation(t, err)
				continue
			}
			for _, it := range items {
				b.Check(it) // must not panic
				if _, _, err := b.Apply(it, store.Item{"PK": store.Str("p")}); err != nil {
					checkValidation(t, err)
				}
			}
		}
	})
}

func checkValidation(t *testing.T, err error) {
	t.Helper()
	var ve *store.ValidationError
	if !errors.As(err, &ve) || ve.Message == "" {
		t.Fatalf("error %v (%T) is not a ValidationError", err, err)
	}
}
