package aggregator

import (
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
)

// The usage-snapshot layout in internal/keys, tested here, where it is used.

func TestEncodedSequenceNumbersCompareAsNumbers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	digits := func() string {
		n := 1 + rng.IntN(40)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + rng.IntN(10))
		}
		if rng.IntN(4) == 0 { // leading zeros do not count
			return "000" + string(b)
		}
		return string(b)
	}
	for i := 0; i < 20_000; i++ {
		a, b := digits(), digits()
		if rng.IntN(10) == 0 {
			b = a
		}
		ea, err1 := keys.EncodeSeq(a)
		eb, err2 := keys.EncodeSeq(b)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		x, _ := new(big.Int).SetString(a, 10)
		y, _ := new(big.Int).SetString(b, 10)
		if got, want := keys.CompareEncodedSeq(ea, eb), x.Cmp(y); got != want {
			t.Fatalf("%s vs %s: encoded %q vs %q compare %d, numbers %d", a, b, ea, eb, got, want)
		}
		if got := strings.Compare(ea, eb); got != x.Cmp(y) {
			t.Fatalf("byte order (what DynamoDB compares) disagrees for %s, %s", a, b)
		}
	}
	for _, s := range []string{"4421584500000000017450439091", "111", "0", "1"} {
		e, _ := keys.EncodeSeq(s)
		t.Logf("%s -> %s", s, e)
	}
	for _, bad := range []string{"", "12a", "-1", "1.5", " 1", strings.Repeat("9", 100)} {
		if _, err := keys.EncodeSeq(bad); err == nil {
			t.Errorf("EncodeSeq(%q) accepted", bad)
		}
	}
	if e, _ := keys.EncodeSeq(strings.Repeat("9", 99)); len(e) != 101 {
		t.Errorf("99 digits: %q", e)
	}
}

func TestUsageKeyLayout(t *testing.T) {
	at := time.Date(2026, 3, 7, 13, 45, 12, 0, time.UTC)
	for _, tc := range []struct {
		w      keys.UsageWindow
		sk     string
		period string
		next   time.Time
		end    time.Time
	}{
		{keys.WindowHour, "H#models/gpt-4#2026-03-07T13#3", "2026-03-07T", time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 7, 14, 0, 0, 0, time.UTC)},
		{keys.WindowDay, "D#models/gpt-4#2026-03-07#3", "2026-03-", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)},
		{keys.WindowMonth, "M#models/gpt-4#2026-03#3", "2026-", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
	} {
		u := keys.Usage{Namespace: "ns", Entity: "user@x", Resource: "models/gpt-4", Window: tc.w, Start: tc.w.Start(at), Shard: 3}
		k := u.Key()
		if k.PK != "ns/USAGE#user@x" || k.SK != tc.sk {
			t.Errorf("%v: key %v", tc.w, k)
		}
		w, res, start, shard, ok := keys.ParseUsageSK(k.SK)
		if !ok || w != tc.w || res != "models/gpt-4" || !start.Equal(u.Start) || shard != 3 {
			t.Errorf("%v: ParseUsageSK = %v %q %v %d %v", tc.w, w, res, start, shard, ok)
		}
		p, next := tc.w.Period(u.Start)
		if p != tc.period || !next.Equal(tc.next) || !strings.HasPrefix(k.SK, keys.UsageSKPrefix(tc.w, "models/gpt-4", p)) {
			t.Errorf("%v: period %q next %v", tc.w, p, next)
		}
		if end := tc.w.End(u.Start); !end.Equal(tc.end) {
			t.Errorf("%v: end %v", tc.w, end)
		}
		if c, ok := keys.UsageWindowOf(tc.w.Code()); !ok || c != tc.w {
			t.Errorf("code %q", tc.w.Code())
		}
	}
	// Sort keys sort by time within a window and resource.
	prev := ""
	for h := 0; h < 24*40; h++ {
		sk := keys.Usage{Namespace: "n", Entity: "e", Resource: "r", Window: keys.WindowHour,
			Start: time.Date(2026, 12, 15, h, 0, 0, 0, time.UTC)}.Key().SK
		if sk <= prev {
			t.Fatalf("%q after %q", sk, prev)
		}
		prev = sk
	}
	for _, bad := range []string{"", "#STATE", "H#r#2026-03-07T13", "X#r#2026-03-07T13#0", "H##2026-03-07T13#0",
		"H#r#2026-03-07#0", "H#r#2026-03-07T13#01", "H#r#2026-03-07T13#-1", "D#r#2026-02-30#0", "H#r#2026-03-07T13#0#1"} {
		if _, _, _, _, ok := keys.ParseUsageSK(bad); ok {
			t.Errorf("ParseUsageSK(%q) accepted", bad)
		}
	}
	for _, tc := range []struct {
		attr, limit string
		events, ok  bool
	}{
		{"tc_rpm", "rpm", false, true}, {"ev_gpt_4", "gpt_4", true, true}, {"tc_", "", false, false},
		{"sq", "", false, false}, {"b_rpm_tc", "", false, false},
	} {
		l, ev, ok := keys.ParseUsageAttr(tc.attr)
		if l != tc.limit || ev != tc.events || ok != tc.ok {
			t.Errorf("ParseUsageAttr(%q) = %q %v %v", tc.attr, l, ev, ok)
		}
	}
	if keys.UsageTimeOK(time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC)) || !keys.UsageTimeOK(time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)) ||
		keys.UsageTimeOK(keys.MaxUsageTime) {
		t.Error("UsageTimeOK bounds")
	}
}
