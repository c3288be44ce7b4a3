package aggregator

import (
	"slices"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store/memsim"
)

// Options at their bounds: a retention of exactly MinRetention or 0
// (never expire) is accepted, one just under is not; HotPercent 100 is the
// highest threshold, a negative one turns proactive sharding off; a
// negative cooldown means none; windows are kept in order whatever order
// they come in; no logger means the default one.
func TestOptionsAtTheirBounds(t *testing.T) {
	st, _ := newStore(memsim.Epoch())
	for _, d := range []time.Duration{MinRetention, 0} {
		p, err := New(st, Options{Retention: map[Window]time.Duration{Hourly: d}})
		if err != nil || p.retention[Hourly] != d {
			t.Errorf("retention %v: %v, kept %v", d, err, p.retention[Hourly])
		}
	}
	if _, err := New(st, Options{Retention: map[Window]time.Duration{Hourly: MinRetention - time.Nanosecond}}); err == nil {
		t.Error("a retention just under MinRetention accepted")
	}
	for _, c := range []struct {
		hot  int
		want int64
	}{{100, 100}, {1, 1}, {0, DefaultHotPercent}, {-1, 0}} {
		p, err := New(st, Options{HotPercent: c.hot})
		if err != nil || p.hotPercent != c.want {
			t.Errorf("HotPercent %d: %v, threshold %d, want %d", c.hot, err, p.hotPercent, c.want)
		}
	}
	for _, c := range []struct{ given, want time.Duration }{{0, DefaultShardCooldown}, {time.Nanosecond, time.Nanosecond}, {-1, 0}} {
		if p, _ := New(st, Options{ShardCooldown: c.given}); p.cooldown != c.want {
			t.Errorf("ShardCooldown %v: %v, want %v", c.given, p.cooldown, c.want)
		}
	}
	p, _ := New(st, Options{Windows: []Window{Monthly, Hourly, Daily}})
	if !slices.IsSorted(p.windows) || len(p.windows) != 3 {
		t.Errorf("windows %v, want the three in order", p.windows)
	}
	if p.log == nil {
		t.Error("no logger")
	}
}
