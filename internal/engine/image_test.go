package engine

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// The quick decoder reads an item by the plan's attribute names and checks
// the bounds itself; on anything it does not vouch for, it hands the item
// to the full decoder. Corrupt any one field of an item the plan wrote (out
// of its bounds, at its bounds, or gone, another attribute in its place)
// or drop the refill time: both
// decoders must then answer alike, the same error or the same image. An
// item the quick decoder accepted with a capacity of 0 would divide by
// zero later; one with a refill period past a year would overflow the
// refill.
func TestDecodeForRejectsWhatDecodeRejects(t *testing.T) {
	limits := []Limit{perSecond("rpm", 100), perMinute("tpm", 6000)}
	p := NewPlan(bucketRef, limits, map[string]int64{"rpm": 1})
	edge := []int64{-1, 0, 1, bucket.MaxTokens, bucket.MaxTokens + 1, bucket.MaxRefillPeriod, bucket.MaxRefillPeriod + 1}
	for _, s := range p.specs {
		for _, field := range []string{s.tk, s.cp, s.bx, s.ra, s.rp, s.tc, attrRefill} {
			for k := -1; k < len(edge); k++ {
				it := p.create(0, 1, T).Item
				if k < 0 {
					delete(it, field)
					it["stray"] = store.Int(1) // as many attributes as the plan's: the quick path looks
				} else {
					it[field] = store.Int(edge[k])
				}
				want, wantErr := Decode(it)
				got, err := decodeFor(p, it, nil)
				if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
					t.Fatalf("%s set to edge %d: quick decoder: %v; full decoder: %v", field, k, err, wantErr)
				}
				if err == nil {
					if diff := cmp.Diff(want.comp, got.comp); diff != "" || want.rf != got.rf {
						t.Fatalf("%s set to edge %d: the decoders disagree: %s", field, k, diff)
					}
				}
			}
		}
	}
}

// What a successful charge write returned is decoded by decodeWritten,
// which takes the limit parameters from the plan when the item carries
// the plan's limits hash: the write conditioned on that hash (or set it
// with the parameters it covers), so they are the plan's. That is the one
// place it is laxer than the full decoder: capacity, burst and refill
// corrupted under the plan's own hash are not looked at. Everything the
// write changes (balance, total consumed, refill time) is checked as
// decodeFor checks it, and an item under another hash (or a missing one)
// is decoded strictly, as decodeFor decodes it.
func TestDecodeWrittenTrustsOnlyTheFieldsTheHashCovers(t *testing.T) {
	limits := []Limit{perSecond("rpm", 100), perMinute("tpm", 6000)}
	p := NewPlan(bucketRef, limits, map[string]int64{"rpm": 1})
	it := p.create(0, 1, T).Item
	want, err := Decode(it)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeWritten(p, it, nil); err != nil || cmp.Diff(want.comp, got.comp) != "" {
		t.Fatalf("an item of the plan: %v, %s", err, cmp.Diff(want.comp, got.comp))
	}
	edge := []int64{-1, 0, bucket.MaxTokens + 1, bucket.MaxRefillPeriod + 1}
	for _, s := range p.specs {
		for _, field := range []string{s.tk, s.cp, s.bx, s.ra, s.rp, s.tc, attrRefill} {
			covered := field == s.cp || field == s.bx || field == s.ra || field == s.rp
			for _, v := range edge {
				for _, hash := range []int64{p.hash, p.hash + 1} {
					it := p.create(0, 1, T).Item
					it[field] = store.Int(v)
					it[attrLimitsHash] = store.Int(hash)
					full, fullErr := Decode(it)
					got, err := decodeWritten(p, it, nil)
					if covered && hash == p.hash {
						// Not looked at: the plan's limits stand.
						if err != nil || cmp.Diff(want.comp, got.comp) != "" {
							t.Fatalf("%s = %d under the plan's hash: %v, %s", field, v, err, cmp.Diff(want.comp, got.comp))
						}
						continue
					}
					if (err == nil) != (fullErr == nil) || err != nil && err.Error() != fullErr.Error() {
						t.Fatalf("%s = %d, hash %d: quick decoder: %v; full decoder: %v", field, v, hash, err, fullErr)
					}
					if err == nil && (cmp.Diff(full.comp, got.comp) != "" || full.rf != got.rf) {
						t.Fatalf("%s = %d, hash %d: the decoders disagree: %s", field, v, hash, cmp.Diff(full.comp, got.comp))
					}
				}
			}
		}
	}
}

// The quick decoder exists to spare the hot path the full decoder's work:
// an item written for the plan decodes with one allocation (the image),
// where the full decoder takes several. It reads the shard count and the
// limits hash as the full decoder does, a count below 1 as 1.
func TestDecodeForTakesTheQuickPath(t *testing.T) {
	p := plan1(bucketRef)
	it := shape{n: 4, rf: T, tk: map[string]int64{"rps": 3000}}.item(p)
	if allocs := testing.AllocsPerRun(20, func() { _, _ = decodeFor(p, it, nil) }); allocs > 1 {
		t.Fatalf("decodeFor allocates %.0f times for an item of its plan, want 1: it took the full decoder", allocs)
	}
	im, err := decodeFor(p, it, nil)
	if err != nil || im.shardCount != 4 || im.hash != p.hash || im.rf != T {
		t.Fatalf("image %+v (%v): want 4 shards, the plan's hash, rf T", im, err)
	}
	for _, n := range []int64{0, -2} {
		it[keys.AttrShardCount] = store.Int(n)
		for name, decode := range map[string]func(store.View) (*Image, error){
			"quick": func(it store.View) (*Image, error) { return decodeFor(p, it, nil) }, "full": Decode,
		} {
			if im, err := decode(it); err != nil || im.ShardCount() != 1 {
				t.Errorf("%s decoder, shard_count %d: %d shards (%v), want 1", name, n, im.ShardCount(), err)
			}
		}
	}
}

// An image decoded for a plan finds each limit of the plan's template by
// its place (Image.known) and keeps its guards: it must answer state
// exactly as the full decoder's image does, for the plan's specs and for
// those of another plan, whose limits it looks up by name. The names
// place the hidden limit between the others in name order.
func TestDecodeForStatesMatchTheFullDecoder(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("zz", 10), perSecond("aa", 5)}, map[string]int64{"aa": 1, "zz": 2})
	other := NewPlan(bucketRef, []Limit{perSecond("zz", 10), perSecond("mm", 7)}, map[string]int64{"zz": 1})
	it := shape{n: 2, rf: T, tk: map[string]int64{"aa": 1500, "zz": -300}, tc: map[string]int64{"aa": 9}}.item(p)
	it["b_zz_fh"] = store.Str("?") // a guard that is not a number: both read as unknown
	quick, err := decodeFor(p, it, nil)
	if err != nil || quick.pt == nil {
		t.Fatalf("decodeFor: %v (placed by the template: %v)", err, err == nil && quick.pt != nil)
	}
	full := image(t, it)
	for _, q := range []*Plan{p, other} {
		for i := range q.specs {
			s := &q.specs[i]
			st1, fl1, fh1, ok1 := quick.state(s)
			st2, fl2, fh2, ok2 := full.state(s)
			if st1 != st2 || fl1 != fl2 || fh1 != fh2 || ok1 != ok2 {
				t.Errorf("%s: quick image %+v %d %d %v, full %+v %d %d %v", s.name, st1, fl1, fh1, ok1, st2, fl2, fh2, ok2)
			}
		}
	}
	if _, fl, fh, _ := quick.state(&p.specs[1]); p.specs[1].name != "zz" || fl != math.MinInt64 || fh != math.MaxInt64 {
		t.Errorf("zz without fh: guards %d %d, want unknown", fl, fh)
	}
}

// satAdd saturates at the int64 limits instead of wrapping: a guard
// bound moved by the refill time of a huge debt must not turn into its
// opposite.
func TestSatAddSaturates(t *testing.T) {
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3},
		{-5, 3, -2},
		{math.MaxInt64, 1, math.MaxInt64},
		{math.MaxInt64 - 1, 1, math.MaxInt64},
		{math.MaxInt64, 0, math.MaxInt64},
		{math.MinInt64, -1, math.MinInt64},
		{math.MinInt64 + 1, -1, math.MinInt64},
		{math.MinInt64, 0, math.MinInt64},
		{math.MaxInt64, math.MinInt64, -1},
		{0, math.MinInt64, math.MinInt64},
	} {
		if got := satAdd(c.a, c.b); got != c.want {
			t.Errorf("satAdd(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

// viewOnly hides an Item behind the View interface: the decoders read it
// as they read a store's own views, not as a map.
type viewOnly struct{ store.View }

// The quick decoders read an Item's map directly, and any other view
// through its methods: both give the same image.
func TestDecodeForReadsAnyView(t *testing.T) {
	p := NewPlan(bucketRef, []Limit{perSecond("rpm", 100), perMinute("tpm", 6000)}, map[string]int64{"rpm": 1})
	it := p.create(0, 2, T).Item
	it[p.specs[0].fl], it[p.specs[0].fh] = store.Int(T+5), store.Int(T+9)
	for name, decode := range map[string]func(store.View) (*Image, error){
		"quick":   func(v store.View) (*Image, error) { return decodeFor(p, v, nil) },
		"written": func(v store.View) (*Image, error) { return decodeWritten(p, v, nil) },
	} {
		want, err := decode(it)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decode(viewOnly{it})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.comp, got.comp); diff != "" || got.rf != want.rf || got.hash != want.hash ||
			got.shardCount != 2 || got.guards != want.guards || got.specAt != want.specAt || got.guards[0] != (guard{T + 5, T + 9}) {
			t.Fatalf("%s: a view decodes unlike its item: %s\n%+v\n%+v", name, diff, got, want)
		}
	}
}

// The write units of an image decoded for a plan are found by the plan's
// place for the hidden limit, not by name: whatever the limits' names
// (sorted, wcu need not come last), they are the item's.
func TestWritesOfAQuickImage(t *testing.T) {
	for _, names := range [][]string{{"rpm"}, {"zz"}, {"a", "zz"}, {"a", "b", "zz"}} {
		var limits []Limit
		for _, n := range names {
			limits = append(limits, perSecond(n, 10))
		}
		p := NewPlan(bucketRef, limits, map[string]int64{names[0]: 1})
		it := p.create(0, 1, T).Item
		it[p.specs[len(p.specs)-1].tc] = store.Int(7000)
		quick, err := decodeFor(p, it, nil)
		if err != nil || quick.pt == nil {
			t.Fatalf("%v: not decoded the quick way (%v)", names, err)
		}
		if w, ok := quick.writes(); !ok || w != 7000 {
			t.Fatalf("%v: writes %d (%v), want 7000", names, w, ok)
		}
		full, _ := Decode(it)
		if w, ok := full.writes(); !ok || w != 7000 {
			t.Fatalf("%v: the full decoder's writes %d (%v), want 7000", names, w, ok)
		}
	}
}
