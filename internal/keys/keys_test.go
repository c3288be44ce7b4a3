package keys

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shardlimit/limiter/store"
)

func TestBucketPKRoundTrip(t *testing.T) {
	for _, b := range []Bucket{
		{"ns", "api-key-123", "gpt-4", 0},
		{"tenant.a", "user@example.com", "models/gpt-3.5", 31},
		{"n", "e:1", "r_x", 7},
	} {
		got, ok := ParseBucketPK(b.PK())
		if !ok || got != b {
			t.Errorf("ParseBucketPK(%q) = %+v, %v; want %+v", b.PK(), got, ok, b)
		}
	}
	if b := (Bucket{"ns", "e", "r", 3}); b.PK() != "ns/BUCKET#e#r#3" || b.Key().SK != "#STATE" {
		t.Errorf("layout changed: %q", b.PK())
	}
}

func TestParseBucketPKRejectsOtherKeys(t *testing.T) {
	for _, pk := range []string{"", "ns/ENTITY#e", "ns/BUCKET#e#r", "ns/BUCKET#e#r#x", "ns/BUCKET#e#r#-1",
		"ns/BUCKET#e#r#01", "/BUCKET#e#r#0", "ns/BUCKET##r#0", "ns/BUCKET#e##0", "a/b/BUCKET#e#r#0", "ns/BUCKET#e#r#0#1"} {
		if b, ok := ParseBucketPK(pk); ok {
			t.Errorf("ParseBucketPK(%q) = %+v, want not ok", pk, b)
		}
	}
}

// A bucket shard enters GSI3 only: each index a new shard enters is one
// more WCU on its creation, and nothing reads a per-resource index.
func TestIndexAttrs(t *testing.T) {
	got := Bucket{"ns", "e", "r/x", 2}.IndexAttrs()
	want := [2][2]string{{store.AttrGSI3PK, "ns/ENTITY#e"}, {store.AttrGSI3SK, "BUCKET#r/x#2"}}
	for i := range want {
		if got[i].Name != want[i][0] || got[i].Value != want[i][1] {
			t.Errorf("index attr %d = %s %q, want %s %q", i, got[i].Name, got[i].Value, want[i][0], want[i][1])
		}
	}
}

func TestUsageWindowAdjective(t *testing.T) {
	for w, want := range map[UsageWindow]string{WindowHour: "hourly", WindowDay: "daily", WindowMonth: "monthly", 0: "", 9: ""} {
		if got := w.Adjective(); got != want {
			t.Errorf("%d: %q, want %q", w, got, want)
		}
	}
}

// Keys are parsed strictly: a shard number in any other form than the one
// the layout writes ("-1", "01", "x") is not a shard; an entry of another
// resource is not one of this bucket's shards.
func TestShardNumbersParseStrictly(t *testing.T) {
	b := Bucket{Namespace: "ns", Entity: "e", Resource: "r"}
	entry := func(sk string) store.Item { return store.Item{store.AttrGSI3SK: store.Str(sk)} }
	for _, want := range []int{0, 7} {
		if s, ok := b.ShardOf(entry("BUCKET#r#" + fmt.Sprint(want))); !ok || s != want {
			t.Fatalf("ShardOf(BUCKET#r#%d) = %d, %v", want, s, ok)
		}
	}
	for _, sk := range []string{"BUCKET#r#-1", "BUCKET#r#01", "BUCKET#r#x", "BUCKET#other#1", "BUCKET#r", "7", ""} {
		if s, ok := b.ShardOf(entry(sk)); ok {
			t.Errorf("ShardOf(%q) = %d, want not a shard", sk, s)
		}
		if r, s, ok := ParseBucketIndexSK(sk); ok && sk != "BUCKET#other#1" {
			t.Errorf("ParseBucketIndexSK(%q) = %q, %d", sk, r, s)
		}
	}
	if _, ok := b.ShardOf(store.Item{}); ok {
		t.Error("ShardOf an item without an index key")
	}
}

// A key is built whatever the lengths of its parts.
func TestLongKeyParts(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, b := range []Bucket{{"n", "e", long, 3}, {"n", long, "r", 3}, {long, "e", "r", 3}} {
		if got, ok := ParseBucketPK(b.PK()); !ok || got != b {
			t.Errorf("round trip of %+v: %+v, %v", b, got, ok)
		}
	}
}

// Usage keys and attributes parse strictly too.
func TestUsageKeysParseStrictly(t *testing.T) {
	if _, ok := UsageWindowOf("X"); ok {
		t.Error("UsageWindowOf(X) ok")
	}
	if _, _, _, _, ok := ParseUsageSK("H#r#2026-01-02T5#0"); ok {
		t.Error("an hour written in another form than the layout's parsed")
	}
	if _, _, _, _, ok := ParseUsageSK("H#r#2026-01-02T05#0"); !ok {
		t.Error("a well-formed hour did not parse")
	}
	for _, attr := range []string{"ev_", "tc_", "ev", "x_rpm"} {
		if l, ev, ok := ParseUsageAttr(attr); ok {
			t.Errorf("ParseUsageAttr(%q) = %q, %v", attr, l, ev)
		}
	}
}

// EntityConfig names exactly the three items Entity and EntityLimits do.
func TestEntityConfigIsEntityAndItsLimits(t *testing.T) {
	meta, own, all := EntityConfig("ns", "key-1", "gpt-4")
	if want := Entity("ns", "key-1"); meta != want {
		t.Errorf("meta %v, want %v", meta, want)
	}
	if want := EntityLimits("ns", "key-1", "gpt-4"); own != want {
		t.Errorf("own %v, want %v", own, want)
	}
	if want := EntityLimits("ns", "key-1", AnyResource); all != want {
		t.Errorf("all %v, want %v", all, want)
	}
}
