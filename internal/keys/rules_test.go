package keys

import (
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
)

// Each identifier rule at its edges: the length bounds, the first byte
// (a letter or a digit; a letter for a limit name) and the bytes that may
// follow, the bytes just outside each range included.
func TestIdentifierRules(t *testing.T) {
	type rule struct {
		name  string
		valid func(string) bool
		max   int
		extra string // the bytes beyond letters, digits, '_', '.', '-'
		digit bool   // a digit may come first
	}
	for _, r := range []rule{
		{"entity", ValidEntity, 256, ":@", true},
		{"resource", ValidResource, 256, ":@/", true},
		{"namespace", ValidNamespace, 64, "", true},
		{"limit name", ValidLimitName, 64, "", false},
	} {
		check := func(s string, want bool) {
			t.Helper()
			if got := r.valid(s); got != want {
				t.Errorf("%s %q: valid %v, want %v", r.name, s, got, want)
			}
		}
		check("", false)
		check("a", true)
		check("a"+strings.Repeat("b", r.max-1), true)
		check("a"+strings.Repeat("b", r.max), false)
		for _, c := range "azAZ" {
			check(string(c), true)
			check(string(c)+string(c), true)
		}
		for _, c := range "09" {
			check(string(c), r.digit)
			check("a"+string(c), true)
		}
		// The neighbours of the ranges a-z, A-Z and 0-9.
		for _, c := range "`{@[/:" {
			check(string(c)+"a", false)
			check("a"+string(c), strings.ContainsRune(r.extra, c))
		}
		for _, c := range "_.-" {
			check(string(c)+"a", false)
			check("a"+string(c), true)
		}
		for _, c := range "#* %\x00\xff" {
			check("a"+string(c), false)
		}
		// Every byte is checked, not only the second.
		check("ab#", false)
		check("ab"+r.extra+"c", true)
	}
}

func TestUsageTimeBounds(t *testing.T) {
	for _, c := range []struct {
		t  time.Time
		ok bool
	}{
		{MinUsageTime, true},
		{MinUsageTime.Add(-time.Nanosecond), false},
		{MaxUsageTime.Add(-time.Nanosecond), true},
		{MaxUsageTime, false},
	} {
		if got := UsageTimeOK(c.t); got != c.ok {
			t.Errorf("UsageTimeOK(%v) = %v, want %v", c.t, got, c.ok)
		}
	}
	for w, valid := range map[UsageWindow]bool{0: false, WindowHour: true, WindowDay: true, WindowMonth: true, WindowMonth + 1: false} {
		if w.Valid() != valid {
			t.Errorf("UsageWindow(%d).Valid() = %v", w, !valid)
		}
	}
}

// A period holds the windows a Query with its prefix finds, and ends where
// the next period begins, across a year's end too.
func TestUsagePeriods(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		w            UsageWindow
		start        string
		prefix, next string
	}{
		{WindowHour, "2026-12-31T23:00:00Z", "2026-12-31T", "2027-01-01T00:00:00Z"},
		{WindowHour, "2026-01-05T07:00:00Z", "2026-01-05T", "2026-01-06T00:00:00Z"},
		{WindowDay, "2026-12-31T00:00:00Z", "2026-12-", "2027-01-01T00:00:00Z"},
		{WindowDay, "2026-02-03T00:00:00Z", "2026-02-", "2026-03-01T00:00:00Z"},
		{WindowMonth, "2026-12-01T00:00:00Z", "2026-", "2027-01-01T00:00:00Z"},
		{0, "2026-12-01T00:00:00Z", "", "2026-12-01T00:00:00Z"},
	} {
		prefix, next := c.w.Period(at(c.start))
		if prefix != c.prefix || !next.Equal(at(c.next)) {
			t.Errorf("%v.Period(%s) = %q, %v; want %q, %s", c.w, c.start, prefix, next, c.prefix, c.next)
		}
		if c.w.Valid() && !strings.HasPrefix(c.w.Format(at(c.start)), prefix) {
			t.Errorf("%v: window %s is not under its period's prefix %q", c.w, c.w.Format(at(c.start)), prefix)
		}
	}
}

// A snapshot's key, its sort-key prefix and its attributes, and their
// parsing.
func TestUsageKeyLayout(t *testing.T) {
	u := Usage{Namespace: "ns", Entity: "e", Resource: "models/gpt-4", Window: WindowHour,
		Start: time.Date(2026, 1, 5, 7, 0, 0, 0, time.UTC), Shard: 12}
	k := u.Key()
	if k.PK != "ns/USAGE#e" || k.SK != "H#models/gpt-4#2026-01-05T07#12" {
		t.Fatalf("key %+v", k)
	}
	if p := UsageSKPrefix(WindowHour, "models/gpt-4", "2026-01-05T"); !strings.HasPrefix(k.SK, p) || p != "H#models/gpt-4#2026-01-05T" {
		t.Errorf("prefix %q", p)
	}
	w, r, start, shard, ok := ParseUsageSK(k.SK)
	if !ok || w != u.Window || r != u.Resource || !start.Equal(u.Start) || shard != u.Shard {
		t.Errorf("ParseUsageSK(%q) = %v %q %v %d %v", k.SK, w, r, start, shard, ok)
	}
	for _, sk := range []string{"H#r#2026-01-05T07", "H##2026-01-05T07#0", "X#r#2026-01-05T07#0", "X#r##0", "#r##0", "H#r#2026-01-05#0",
		"H#r#2026-01-05T07#-1", "H#r#2026-01-05T07#01", "H#r#2026-01-05T07#x", "H#r#2026-01-05T07#0#1"} {
		if _, _, _, _, ok := ParseUsageSK(sk); ok {
			t.Errorf("ParseUsageSK(%q) ok", sk)
		}
	}
	for _, c := range []struct {
		attr, limit string
		events      bool
	}{
		{UsageConsumedAttr("rpm"), "rpm", false},
		{UsageEventsAttr("rpm"), "rpm", true},
		{"tc_x", "x", false},
		{"ev_tc_x", "tc_x", true},
	} {
		if l, ev, ok := ParseUsageAttr(c.attr); !ok || l != c.limit || ev != c.events {
			t.Errorf("ParseUsageAttr(%q) = %q, %v, %v", c.attr, l, ev, ok)
		}
	}
	if UsageConsumedAttr("rpm") != "tc_rpm" || UsageEventsAttr("rpm") != "ev_rpm" {
		t.Error("usage attribute names changed")
	}
}

// EncodeSeq orders sequence numbers by value as strings, and refuses what
// is not one.
func TestEncodeSeq(t *testing.T) {
	long := strings.Repeat("9", MaxSeqDigits)
	for _, c := range []struct{ seq, want string }{
		{"0", "010"},
		{"000", "010"},
		{"7", "017"},
		{"0042", "0242"},
		{"123456789", "09123456789"},
		{"1234567890", "101234567890"},
		{"0" + long, "99" + long},
	} {
		if got, err := EncodeSeq(c.seq); err != nil || got != c.want {
			t.Errorf("EncodeSeq(%q) = %q, %v; want %q", c.seq, got, err, c.want)
		}
	}
	for _, seq := range []string{"", "1" + long, "12a", "a12", "1/2", "1:2", "-1", "1 "} {
		if got, err := EncodeSeq(seq); err != ErrSeq {
			t.Errorf("EncodeSeq(%q) = %q, %v; want ErrSeq", seq, got, err)
		}
	}
	a, _ := EncodeSeq("99")
	b, _ := EncodeSeq("100")
	if CompareEncodedSeq(a, b) != -1 || CompareEncodedSeq(b, a) != 1 || CompareEncodedSeq(a, a) != 0 {
		t.Errorf("99 and 100 encoded as %q and %q compare wrong", a, b)
	}
}

// The shards query reads the bucket's entity's entries of its resource.
func TestShardsQuery(t *testing.T) {
	q := Bucket{Namespace: "ns", Entity: "e", Resource: "r/x", Shard: 3}.ShardsQuery()
	if q.Index != store.IndexGSI3 || q.PartitionKey != "ns/ENTITY#e" || q.SortKeyPrefix != "BUCKET#r/x#" {
		t.Errorf("query %+v", q)
	}
}

// A window is aligned on UTC whatever the time's zone: 23:30 on the 5th
// five hours west of UTC is in the hour, the day and the month of 04:00
// on the 6th, UTC.
func TestUsageWindowsAreUTC(t *testing.T) {
	at := time.Date(2026, 1, 31, 23, 30, 0, 0, time.FixedZone("UTC-5", -5*3600))
	for w, want := range map[UsageWindow]time.Time{
		WindowHour:  time.Date(2026, 2, 1, 4, 0, 0, 0, time.UTC),
		WindowDay:   time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
		WindowMonth: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
	} {
		if got := w.Start(at); !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("%v.Start(%v) = %v, want %v", w, at, got, want)
		}
	}
}
