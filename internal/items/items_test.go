package items

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

type limit struct {
	Name                    string
	Capacity, Burst, Refill int64
	Period                  time.Duration

	Window, TimeZone string
	WeekStart        time.Weekday
	MonthDay         int
	Shadow           bool
	TTL              time.Duration
}

func valid(limit) error { return nil }

// Limits round-trip through their item (a shadow limit keeps its flag, a
// shadow quota both its flag and its calendar, a concurrency cap its TTL), a burst of 0 stored as the
// capacity; the item carries its configuration index entry.
func TestLimitsRoundTrip(t *testing.T) {
	ls := []limit{{Name: "rpm", Capacity: 100, Refill: 100, Period: time.Minute}, {Name: "tpm", Capacity: 10, Burst: 20, Refill: 5, Period: 250 * time.Millisecond, Shadow: true},
		{Name: "usd", Capacity: 50, Burst: 50, Window: "month", TimeZone: "Europe/Paris", MonthDay: 15},
		{Name: "eur", Capacity: 7, Burst: 7, Window: "week", TimeZone: "America/New_York", WeekStart: time.Monday, Shadow: true},
		{Name: "inflight", Capacity: 10, Burst: 10, Window: "concurrent", TTL: 5 * time.Minute}}
	k := keys.EntityLimits("ns", "k", keys.AnyResource)
	it := LimitsItem("ns", k, "k", "", ls, "")
	if s, _ := it.Str(AttrLimits); s != "rpm=100/100/100/60000;tpm=10/20/5/250/s;usd=50/50/0/0|month|Europe/Paris|0|15;eur=7/7/0/0/s|week|America/New_York|1|0;inflight=10/10/0/0|concurrent||0|0|300000" {
		t.Fatalf("stored %q", s)
	}
	if sk, _ := it.Str(store.AttrGSI3SK); sk != keys.LimitsIndexSK("k", keys.AnyResource) {
		t.Fatalf("index entry %q", sk)
	}
	got, ok, err := DecodeLimits(it, valid)
	ls[0].Burst = 100
	if err != nil || !ok || len(got) != 5 || got[0] != ls[0] || got[1] != ls[1] || got[2] != ls[2] || got[3] != ls[3] || got[4] != ls[4] {
		t.Fatalf("decoded %+v %v %v", got, ok, err)
	}
	if got, ok, err := DecodeLimits[limit](nil, valid); got != nil || ok || err != nil {
		t.Fatalf("no item: %v %v %v", got, ok, err)
	}
}

// A malformed or invalid stored limit is an error naming it.
func TestDecodeLimitsRefusesBadItems(t *testing.T) {
	for s, want := range map[string]string{"rpm=1/1/1": "malformed", "usd=1/1/0/0|month|UTC|0": "malformed", "usd=1/1/0/0|month|UTC|x|1": "malformed", "rpm=1/1/x/1": "malformed", "rpm=1/1/1/1": "no good"} {
		_, _, err := DecodeLimits(store.Item{AttrLimits: store.Str(s)}, func(limit) error { return errors.New("no good") })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", s, err, want)
		}
	}
	if _, _, err := DecodeLimits(store.Item{}, valid); err == nil || !strings.Contains(err.Error(), "has no limits attribute") {
		t.Errorf("an item without limits: %v, want the attribute named missing", err)
	}
}

// A scope may store a mode beside its limits, or a mode alone: the item
// then has no limits (DecodeLimits says none, not malformed), and a scope
// with neither has no item at all. A mode this library does not know is an
// error, not "enforcing": a table written by a newer library must not turn
// a refused scope into an enforcing one.
func TestModeBesideLimits(t *testing.T) {
	k := keys.ResourceLimits("ns", "gpt-4")
	it := LimitsItem("ns", k, "", "gpt-4", []limit{{Name: "rpm", Capacity: 1, Burst: 1, Refill: 1, Period: time.Second}}, ModeRefuse)
	if m, err := DecodeMode(it); m != ModeRefuse || err != nil {
		t.Fatalf("mode %q %v", m, err)
	}
	alone := LimitsItem[limit]("ns", k, "", "gpt-4", nil, ModeAdmit)
	if ls, ok, err := DecodeLimits(alone, valid); ls != nil || ok || err != nil {
		t.Fatalf("a mode alone: limits %v %v %v", ls, ok, err)
	}
	if m, err := DecodeMode(alone); m != ModeAdmit || err != nil {
		t.Fatalf("a mode alone: %q %v", m, err)
	}
	if it := LimitsItem[limit]("ns", k, "", "gpt-4", nil, ""); it != nil {
		t.Fatalf("neither limits nor mode: %v, want no item", it)
	}
	if m, err := DecodeMode(nil); m != "" || err != nil {
		t.Fatalf("no item: %q %v", m, err)
	}
	if _, err := DecodeMode(store.Item{AttrMode: store.Str("bypass")}); err == nil || !strings.Contains(err.Error(), `"bypass"`) {
		t.Fatalf("unknown mode: %v", err)
	}
}

// An entity round-trips; cascade needs a parent.
func TestEntityRoundTrip(t *testing.T) {
	for _, e := range []Entity{{ID: "k"}, {ID: "k", Parent: "p"}, {ID: "k", Parent: "p", Cascade: true}} {
		if got := DecodeEntity("k", EntityItem("ns", e)); got != e {
			t.Errorf("%+v decoded as %+v", e, got)
		}
	}
	if got := DecodeEntity("k", store.Item{AttrCascade: store.Int(1)}); got.Cascade {
		t.Error("cascade without a parent")
	}
}

// The schema check writes the version on a new table and refuses another.
func TestCheckSchemaVersion(t *testing.T) {
	if err := CheckSchema(context.Background(), nil, store.Item{AttrVersion: store.Int(SchemaVersion)}, nil); err != nil {
		t.Fatal(err)
	}
	err := CheckSchema(context.Background(), nil, store.Item{AttrVersion: store.Int(SchemaVersion + 1)}, nil)
	if !errors.Is(err, ErrSchemaVersion) || !strings.Contains(err.Error(), "schema version 2") {
		t.Fatalf("%v", err)
	}
}

// Two clients that find no version item both write it; the one whose
// write finds the item there already checks that item. A table another
// version of the library made is refused the same way.
func TestCheckSchemaOfANewTable(t *testing.T) {
	ctx := context.Background()
	st := memsim.New()
	writes := 0
	counted := func(store.Capacity, error) { writes++ }
	for client := 1; client <= 2; client++ {
		if err := CheckSchema(ctx, st, nil, counted); err != nil || writes != client {
			t.Fatalf("client %d: %v after %d writes", client, err, writes)
		}
	}
	k := keys.Schema()
	got, err := st.Get(ctx, store.GetInput{Key: k, ConsistentRead: true})
	if err != nil || Version(got.Item) != SchemaVersion {
		t.Fatalf("version item %v, %v", got.Item, err)
	}
	other := memsim.New()
	if _, err := other.Put(ctx, store.PutInput{Item: store.Item{store.AttrPK: store.Str(k.PK), store.AttrSK: store.Str(k.SK),
		AttrVersion: store.Int(SchemaVersion + 1)}}); err != nil {
		t.Fatal(err)
	}
	if err := CheckSchema(ctx, other, nil, counted); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("a table of version %d: %v", SchemaVersion+1, err)
	}
}
