package keys

import "testing"

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
	want := [4]string{"ns/RESOURCE#r/x", "BUCKET#e#2", "ns/ENTITY#e", "BUCKET#r/x#2"}
	for i := range want {
		if got[i].Value != want[i] {
			t.Errorf("index attr %s = %q, want %q", got[i].Name, got[i].Value, want[i])
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
