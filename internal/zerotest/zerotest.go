// Package zerotest runs the calls a caller can make with nil, zero or
// nonsense input and fails a test on a panic or an unexpected answer.
// Only tests import it.
package zerotest

import (
	"slices"
	"strings"
	"testing"
)

// Call is one call a caller can make with nil, zero or nonsense input.
// Want is what its error must be: "" anything (only no panic), "ok" nil,
// else an error whose text contains Want (the field it names).
type Call struct {
	Name string
	Fn   func() error
	Want string
}

// Run makes each call, failing t, with the call's name, on a panic or an
// error that is not what Want says. A test may declare its own type of
// the same fields, so that its tables need no field names.
func Run[C ~struct {
	Name string
	Fn   func() error
	Want string
}](t testing.TB, calls []C) {
	t.Helper()
	for _, x := range calls {
		c := Call(x)
		var err error
		if p := catch(func() { err = c.Fn() }); p != nil {
			t.Errorf("%s panicked: %v", c.Name, p)
			continue
		}
		switch {
		case c.Want == "":
		case c.Want == "ok":
			if err != nil {
				t.Errorf("%s: %v, want no error", c.Name, err)
			}
		case err == nil:
			t.Errorf("%s: no error, want one naming %s", c.Name, c.Want)
		case !strings.Contains(err.Error(), c.Want):
			t.Errorf("%s: %v, want an error naming %s", c.Name, err, c.Want)
		}
	}
}

// NoPanics makes each call, in the order of their names, failing t with
// the name of each that panics.
func NoPanics(t testing.TB, calls map[string]func()) {
	t.Helper()
	names := make([]string, 0, len(calls))
	for name := range calls {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if p := catch(calls[name]); p != nil {
			t.Errorf("%s panicked: %v", name, p)
		}
	}
}

// catch runs fn and returns what it panicked with (nil: it returned).
func catch(fn func()) (p any) {
	defer func() { p = recover() }()
	fn()
	return nil
}
