package limiter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// Bad input is refused with a ValidationError naming the field, and writes
// nothing. All of it is caught before any store call, except "no limits":
// whether limits are stored for the entity is known only after reading,
// and so are the names and bursts Consume is checked against.
func TestBadInputIsRefusedBeforeAnyStoreCall(t *testing.T) {
	e := newEnv(t)
	l := e.limiter()
	e.mustAcquire(l, req("warm", rpm(10), one)) // the table's schema item exists
	long := strings.Repeat("a", 257)
	good := rpm(10)
	cases := map[string]Request{
		"empty entity":         {Resource: "r", Limits: good, Consume: one},
		"entity too long":      {Entity: long, Resource: "r", Limits: good, Consume: one},
		"# in entity":          {Entity: "a#b", Resource: "r", Limits: good, Consume: one},
		"/ in entity":          {Entity: "a/b", Resource: "r", Limits: good, Consume: one},
		"entity starts with _": {Entity: "_a", Resource: "r", Limits: good, Consume: one},
		"# in resource":        {Entity: "a", Resource: "r#1", Limits: good, Consume: one},
		"reserved wcu":         {Entity: "a", Resource: "r", Limits: []Limit{PerSecond("wcu", 1)}, Consume: map[string]int64{"wcu": 1}},
		"limit name digit":     {Entity: "a", Resource: "r", Limits: []Limit{PerSecond("1x", 1)}, Consume: map[string]int64{"1x": 1}},
		"zero capacity":        {Entity: "a", Resource: "r", Limits: []Limit{PerSecond("x", 0)}, Consume: map[string]int64{"x": 1}},
		"negative refill":      {Entity: "a", Resource: "r", Limits: []Limit{{Name: "x", Capacity: 1, Refill: -1, Period: time.Second}}, Consume: map[string]int64{"x": 1}},
		"burst below capacity": {Entity: "a", Resource: "r", Limits: []Limit{PerSecond("x", 10).WithBurst(5)}, Consume: map[string]int64{"x": 1}},
		"sub-ms period":        {Entity: "a", Resource: "r", Limits: []Limit{{Name: "x", Capacity: 1, Refill: 1, Period: time.Microsecond}}, Consume: map[string]int64{"x": 1}},
		"period over a year":   {Entity: "a", Resource: "r", Limits: []Limit{PerDay("x", 1)}, Consume: map[string]int64{"x": 1}},
		"overflowing capacity": {Entity: "a", Resource: "r", Limits: []Limit{PerSecond("x", MaxTokens+1)}, Consume: map[string]int64{"x": 1}},
		"duplicate limit":      {Entity: "a", Resource: "r", Limits: []Limit{PerSecond("x", 1), PerMinute("x", 1)}, Consume: map[string]int64{"x": 1}},
		"zero amount":          {Entity: "a", Resource: "r", Limits: good, Consume: map[string]int64{"rpm": 0}},
		"negative amount":      {Entity: "a", Resource: "r", Limits: good, Consume: map[string]int64{"rpm": -1}},
		"overflowing amount":   {Entity: "a", Resource: "r", Limits: good, Consume: map[string]int64{"rpm": MaxTokens + 1}},
		"undefined limit":      {Entity: "a", Resource: "r", Limits: good, Consume: map[string]int64{"tpm": 1}},
		"amount above burst":   {Entity: "a", Resource: "r", Limits: good, Consume: map[string]int64{"rpm": 11}},
		"nothing to consume":   {Entity: "a", Resource: "r", Limits: good},
		"no limits":            {Entity: "a", Resource: "r", Consume: one},
		"unknown policy":       {Entity: "a", Resource: "r", Limits: good, Consume: one, Policy: 9},
	}
	cases["period over a year"].Limits[0].Period = 367 * 24 * time.Hour
	writesBefore := e.st.Totals().Ops[memsim.OpUpdate].Requests + e.st.Totals().Ops[memsim.OpPut].Requests
	for name, r := range cases {
		_, err := l.Acquire(e.ctx, r)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field == "" || ve.Rule == "" {
			t.Errorf("%s: got %v, want a ValidationError naming the field", name, err)
		}
	}
	if w := e.st.Totals().Ops[memsim.OpUpdate].Requests + e.st.Totals().Ops[memsim.OpPut].Requests; w != writesBefore {
		t.Fatalf("bad input wrote to the store (%d writes)", w-writesBefore)
	}
	if _, err := New(e.st, WithNamespace("a/b")); !errors.Is(err, ErrInvalid) {
		t.Errorf("namespace with '/': %v", err)
	}
	if _, err := New(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil store: %v", err)
	}
}

func TestValidIdentifiers(t *testing.T) {
	for _, id := range []string{"a", "A1", "user@example.com", "key:1", "a_b.c-d", strings.Repeat("x", 256)} {
		if err := checkEntity("e", id); err != nil {
			t.Errorf("entity %q: %v", id, err)
		}
	}
	if err := checkResource("r", "models/gpt-3.5"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"rpm", "gpt-3.5", "rate-limit", "a_b", "ttl"} {
		if err := PerMinute(name, 1).Validate(); err != nil {
			t.Errorf("limit name %q: %v", name, err)
		}
	}
}

// A Consume entry named "" is a bad limit name: refused before any store
// call, on its own or beside good entries, whatever limits apply. (""
// once stood for "no bad entry yet" and was never reported.)
func TestEmptyConsumeNameIsRefusedBeforeAnyStoreCall(t *testing.T) {
	e := newEnv(t)
	l := e.limiter(WithDefaultLimits(rpm(10)...))
	e.mustAcquire(l, req("warm", rpm(10), one))
	for name, r := range map[string]Request{
		"beside a good entry":  req("a", rpm(10), map[string]int64{"rpm": 1, "": 1}),
		"alone":                req("a", rpm(10), map[string]int64{"": 1}),
		"with default limits":  {Entity: "a", Consume: map[string]int64{"rpm": 1, "": 1}},
		"with a zero amount":   req("a", rpm(10), map[string]int64{"rpm": 1, "": 0}),
		"beside a bad amount":  req("a", rpm(10), map[string]int64{"rpm": 0, "": 1}),
		"beside a bad name":    req("a", rpm(10), map[string]int64{"rpm": 1, "1x": 1, "": 1}),
		"with no limits given": {Entity: "a", Resource: "r", Consume: map[string]int64{"": 1}},
	} {
		before := e.st.Totals().Requests
		_, err := l.Acquire(e.ctx, r)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "Request.Consume[]" {
			t.Errorf("%s: got %v, want a ValidationError for Request.Consume[]", name, err)
		}
		if n := e.st.Totals().Requests - before; n != 0 {
			t.Errorf("%s: %d store calls before the error, want 0", name, n)
		}
	}
	// The check against the limits that apply, on its own.
	err := checkConsume(rpm(10), map[string]int64{"rpm": 1, "": 1}, "")
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "Request.Consume[]" {
		t.Fatalf("checkConsume: got %v, want a ValidationError for Request.Consume[]", err)
	}
}
