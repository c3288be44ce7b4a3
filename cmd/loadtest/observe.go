package main

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardlimit/limiter"
)

// observer adds up the limiter's events of the measured acquires per
// write path (the last path each acquire took).
type observer struct {
	on    atomic.Bool
	mu    sync.Mutex
	paths map[limiter.Path]*pathStats
	hot   pathStats // the acquires admitted by one write, nothing read
	total pathStats // every path's
	// commits are the Commit calls that wrote: the releases of a
	// concurrency cap's slots.
	commits pathStats
	// epoch is the zero of attempt times; splits holds, per key, when
	// the acquires that doubled its bucket ended (ns since epoch).
	epoch  time.Time
	splits map[int][]int64
}

// pathStats is what the acquires that ended on one path cost.
type pathStats struct {
	Path        string  `json:"path"`
	Acquires    int64   `json:"acquires"`
	Admitted    int64   `json:"admitted"`
	Refused     int64   `json:"refused"`
	Unavailable int64   `json:"unavailable"`
	RoundTrips  int64   `json:"round_trips"`
	Throttled   int64   `json:"throttled"`
	Doublings   int64   `json:"shard_doublings"`
	WCU         float64 `json:"wcu"`
	RCU         float64 `json:"rcu"`
	path        limiter.Path
}

func newObserver() *observer {
	return &observer{paths: make(map[limiter.Path]*pathStats), splits: make(map[int][]int64)}
}

// splitsOf returns, per key of nkeys, when its bucket doubled (see
// observer.splits).
func (o *observer) splitsOf(nkeys int) [][]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([][]int64, nkeys)
	for k, ds := range o.splits {
		if k < nkeys {
			out[k] = slices.Clone(ds)
		}
	}
	return out
}

// Observe implements limiter.Observer.
func (o *observer) Observe(ev limiter.Event) {
	if ev.Op == "commit" && o.on.Load() {
		o.mu.Lock()
		o.commits.add(ev)
		o.mu.Unlock()
		return
	}
	if ev.Op != "acquire" || !o.on.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if k, err := strconv.Atoi(strings.TrimPrefix(ev.Entity, "e")); ev.ShardDoublings > 0 && err == nil {
		o.splits[k] = append(o.splits[k], time.Since(o.epoch).Nanoseconds())
	}
	p := o.paths[ev.Path]
	if p == nil {
		p = &pathStats{Path: ev.Path.String(), path: ev.Path}
		o.paths[ev.Path] = p
	}
	p.add(ev)
	o.total.add(ev)
	if ev.Outcome == limiter.Admitted && ev.RoundTrips == 1 && ev.ReadUnits == 0 {
		o.hot.add(ev)
	}
}

// add counts one acquire's event.
func (p *pathStats) add(ev limiter.Event) {
	p.Acquires++
	switch ev.Outcome {
	case limiter.Admitted:
		p.Admitted++
	case limiter.Rejected:
		p.Refused++
	case limiter.Unavailable:
		p.Unavailable++
	}
	p.RoundTrips += int64(ev.RoundTrips)
	p.Throttled += int64(ev.Throttled)
	p.Doublings += int64(ev.ShardDoublings)
	p.WCU += ev.WriteUnits
	p.RCU += ev.ReadUnits
}

// snapshot returns the paths taken, in the order of the limiter's Path
// constants, their sum, and the hot path: the acquires admitted by one
// write (speculative, or a lone writer's full write) and no read (their
// limits were cached).
func (o *observer) snapshot() (paths []pathStats, total, hot pathStats) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range o.paths {
		paths = append(paths, *p)
	}
	slices.SortFunc(paths, func(a, b pathStats) int { return int(a.path) - int(b.path) })
	total, hot = o.total, o.hot
	total.Path, hot.Path = "all", "hot"
	return paths, total, hot
}
