package keys

import (
	"fmt"
	"testing"
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

func TestIndexAttrs(t *testing.T) {
	got := Bucket{"ns", "e", "r/x", 2}.IndexAttrs()
	want := [4]string{"ns/RESOURCE#r/x#0", "BUCKET#e#2", "ns/ENTITY#e", "BUCKET#r/x#2"}
	for i := range want {
		if got[i].Value != want[i] {
			t.Errorf("index attr %s = %q, want %q", got[i].Name, got[i].Value, want[i])
		}
	}
}

// One index key per resource capped how fast a resource could gain
// buckets (~1,000 a second: one index partition). The GSI2 key now spreads
// a resource over ResourceIndexFanOut keys by a hash of the entity, pinned
// here because moving it moves index entries (a layout change).
func TestRegressionOneIndexKeyPerResource(t *testing.T) {
	for entity, want := range map[string]string{"e": "ns/RESOURCE#r/x#0", "api-key-123": "ns/RESOURCE#r/x#8", "key-0000": "ns/RESOURCE#r/x#3"} {
		if got := ResourceIndexPK("ns", "r/x", entity); got != want {
			t.Errorf("ResourceIndexPK(%q) = %q, want %q", entity, got, want)
		}
	}
	pks := ResourceIndexPKs("ns", "r/x")
	if len(pks) != ResourceIndexFanOut+1 || pks[ResourceIndexFanOut] != "ns/RESOURCE#r/x" {
		t.Fatalf("ResourceIndexPKs = %q: want the %d keys, then the unsuffixed one", pks, ResourceIndexFanOut)
	}
	count := map[string]int{}
	const n = 16_000
	for i := range n {
		b := Bucket{Namespace: "ns", Entity: fmt.Sprintf("key-%05d", i), Resource: "r/x", Shard: 3}
		pk := b.IndexAttrs()[0].Value
		if b.WithShard(0).IndexAttrs()[0].Value != pk {
			t.Fatalf("shards of one bucket on different index keys")
		}
		count[pk]++
	}
	if len(count) != ResourceIndexFanOut {
		t.Fatalf("%d index keys used, want %d", len(count), ResourceIndexFanOut)
	}
	for _, pk := range pks[:ResourceIndexFanOut] {
		if c := count[pk]; c < n/ResourceIndexFanOut/2 || c > 2*n/ResourceIndexFanOut {
			t.Errorf("%s holds %d of %d buckets: not spread", pk, c, n)
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
