package keys

import (
	"sort"
	"strings"
	"testing"
	"time"
)

func TestConfigIndexSKRoundTrip(t *testing.T) {
	for _, c := range []struct {
		sk               string
		entity, resource string
		limits           bool
	}{
		{EntityIndexSK("key-1"), "key-1", "", false},
		{LimitsIndexSK("key-1", AnyResource), "key-1", "*", true},
		{LimitsIndexSK("user@x.com", "models/gpt-4"), "user@x.com", "models/gpt-4", true},
		{LimitsIndexSK("", "models/gpt-4"), "", "models/gpt-4", true},
	} {
		e, r, limits, ok := ParseConfigIndexSK(c.sk)
		if !ok || e != c.entity || r != c.resource || limits != c.limits {
			t.Errorf("ParseConfigIndexSK(%q) = %q %q %v %v", c.sk, e, r, limits, ok)
		}
	}
	for _, sk := range []string{"", "ENTITY#", "ENTITY#a#b", "LIMITS#ENTITY#e", "LIMITS#ENTITY##r", "LIMITS#ENTITY#e#", "LIMITS#RESOURCE#",
		"LIMITS#RESOURCE#a#b", "BUCKET#r#0", "LIMITS#OTHER#x"} {
		if e, r, _, ok := ParseConfigIndexSK(sk); ok {
			t.Errorf("ParseConfigIndexSK(%q) = %q %q, want not ok", sk, e, r)
		}
	}
	if ConfigIndexPK("ns") == EntityPK("ns", "CONFIG") {
		t.Error("the configuration partition must not be an entity's GSI3 partition")
	}
}

func TestBucketIndexSK(t *testing.T) {
	b := Bucket{"ns", "e", "models/gpt-4", 12}
	r, s, ok := ParseBucketIndexSK(b.IndexAttrs()[1].Value)
	if !ok || r != "models/gpt-4" || s != 12 {
		t.Fatalf("ParseBucketIndexSK = %q %d %v", r, s, ok)
	}
	if p := BucketIndexPrefix("gpt"); p != "BUCKET#gpt#" {
		t.Errorf("prefix %q: a resource's prefix must end at its '#', or gpt would select gpt-4", p)
	}
	if p := BucketIndexPrefix(""); !strings.HasPrefix(b.IndexAttrs()[1].Value, p) {
		t.Errorf("prefix %q of every bucket does not select %q", p, b.IndexAttrs()[1].Value)
	}
	for _, sk := range []string{"BUCKET#", "BUCKET#r", "BUCKET##0", "BUCKET#r#x", "BUCKET#r#01", "BUCKET#a#b#0", "ENTITY#e"} {
		if _, _, ok := ParseBucketIndexSK(sk); ok {
			t.Errorf("ParseBucketIndexSK(%q) ok", sk)
		}
	}
}

// Audit sort keys order newest first.
func TestAuditSKOrdersNewestFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var sks []string
	for _, d := range []time.Duration{0, time.Millisecond, time.Hour, 1000 * time.Hour} {
		sks = append(sks, AuditSK(t0.Add(d), 7))
	}
	if !sort.IsSorted(sort.Reverse(sort.StringSlice(sks))) {
		t.Fatalf("later records must sort first: %q", sks)
	}
	if !sort.SliceIsSorted(sks, func(i, j int) bool { return sks[i] >= sks[j] }) || sks[0] == sks[1] {
		t.Fatalf("a record a millisecond later must sort strictly first: %q", sks)
	}
	if AuditPK("ns", "e", "") == AuditPK("ns", "", "e") {
		t.Error("an entity's and a resource's audit partitions must differ")
	}
	if e, r := AuditPK("ns", "e", ""), AuditPK("ns", "", "models/x"); e != "ns/AUDIT#ENTITY#e" || r != "ns/AUDIT#RESOURCE#models/x" {
		t.Errorf("audit partitions %q, %q", e, r)
	}
	if got := AuditSK(time.Unix(0, 0), 0); got != "9999999999999#0" {
		t.Errorf("AuditSK(epoch) = %q", got)
	}
	// A clock outside [1970, 2286] writes the nearest time the key holds.
	if got := AuditSK(time.Unix(-5, 0), 10); got != "9999999999999#a" {
		t.Errorf("AuditSK(before the epoch) = %q", got)
	}
	if got := AuditSK(time.UnixMilli(MaxAuditMs+5), 0); got != "0000000000000#0" {
		t.Errorf("AuditSK(after 2286) = %q", got)
	}
}
