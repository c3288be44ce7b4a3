package store_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"

	"github.com/shardlimit/limiter/store"
)

// Every exported function and method of the package on zero values, nil
// receivers and nil or empty input: no panic; Build refuses an empty name
// or a zero Value with an error naming it.
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	var (
		nilCF   *store.ConditionFailedError
		nilTh   *store.ThrottledError
		nilTC   *store.TransactionCanceledError
		nilUn   *store.UnavailableError
		nilVal  *store.ValidationError
		nilItem store.Item
		zv      store.Value
	)
	calls := map[string]func(){
		"OutcomeUnknown(nil)": func() { store.OutcomeUnknown(nil); store.OutcomeUnknown(nilUn) },
		"zero Capacity.Add":   func() { store.Capacity{}.Add(store.Capacity{}) },
		"And/Or/Not of nothing": func() {
			store.And()
			store.Or()
			store.Not(store.Condition{})
			store.And(store.Condition{}, store.Condition{})
		},
		"zero Condition":           func() { c := store.Condition{}; c.And(); c.IsZero() },
		"nil ConditionFailedError": func() { _ = nilCF.Error(); errors.Is(nilCF, store.ErrConditionFailed) },
		"nil ThrottledError":       func() { _ = nilTh.Error() },
		"zero ThrottledError":      func() { _ = (&store.ThrottledError{}).Error() },
		"nil TransactionCanceled":  func() { _ = nilTC.Error() },
		"nil UnavailableError":     func() { _ = nilUn.Error(); _ = nilUn.Unwrap() },
		"zero UnavailableError":    func() { _ = (&store.UnavailableError{}).Error() },
		"nil ValidationError":      func() { _ = nilVal.Error() },
		"Build zero":               func() { _, _ = store.Build(store.Update{}, store.Condition{}) },
		"zero Expr":                func() { e := store.Expr{}; e.Clone(); e.Equal(store.Expr{}); e.IsZero() },
		"nil Item": func() {
			nilItem.Clone()
			nilItem.Int("")
			nilItem.Key()
			nilItem.Str("")
			for range nilItem.Numbers() {
			}
		},
		"zero Key.String": func() { _ = store.Key{}.String() },
		"empty Name conditions": func() {
			n := store.Name("")
			n.BeginsWith("")
			n.Between(nil, nil)
			n.Equal(nil)
			n.Exists()
			n.GreaterThan(nil)
			n.GreaterThanEqual(zv)
			n.LessThan(nil)
			n.LessThanEqual(nil)
			n.NotEqual(nil)
			n.NotExists()
			_, _ = store.Build(store.Update{}, n.Equal(nil).And(n.Between(nil, zv)))
		},
		"ReturnValue(255).String": func() { _ = store.ReturnValue(255).String() },
		"zero Update": func() {
			u := store.Update{}.Add("", zv).Remove("").Set("", nil).SetIfNotExists("", zv).SetIfNotExistsPlus("", zv, zv)
			u.Len()
			_, _ = store.Build(u, store.Condition{})
		},
		"zero Value": func() {
			zv.AsInt()
			zv.AsString()
			zv.Equal(zv)
			_ = zv.GoString()
			zv.IsValid()
			_ = zv.Kind()
			_ = zv.String()
			store.Int(math.MinInt64).Equal(store.Str(""))
		},
	}
	zerotest.NoPanics(t, calls)
	for name, c := range map[string]struct {
		u    store.Update
		c    store.Condition
		want string
	}{
		"empty name":  {store.Update{}.Add("", store.Int(1)), store.Condition{}, "name"},
		"zero value":  {store.Update{}.Add("a", store.Value{}), store.Condition{}, "value"},
		"nil operand": {store.Update{}, store.Name("a").Equal(nil), "value"},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Build with %s panicked: %v", name, p)
				}
			}()
			_, err := store.Build(c.u, c.c)
			if !errors.Is(err, store.ErrValidation) || !strings.Contains(strings.ToLower(err.Error()), c.want) {
				t.Errorf("Build with %s: %v, want a ValidationError naming the %s", name, err, c.want)
			}
		}()
	}
}
