package main

import (
	"fmt"
	"io"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/shardlimit/limiter"
)

// timeline counts, per interval of the limiter's measured time, what was
// offered and what reached the store (-timeline): the slots of the send
// schedule, the acquires actually sent, the write requests the store
// applied by outcome, and the acquires that ended, by write path. It shows
// whether a busy second of the key comes from the load (sends bunched
// together) or from the limiter (more writes per send).
type timeline struct {
	epoch atomic.Int64 // UnixNano of the measurement's start; 0 before
	every time.Duration
	rows  []tlRow
}

type tlRow struct {
	slots, sends, late            atomic.Int64
	writes, condFailed, throttled atomic.Int64
	paths                         [tlPaths]atomic.Int64
}

// tlPaths covers the limiter's Path values the report shows.
const tlPaths = 12

func newTimeline(every, total time.Duration) *timeline {
	if every <= 0 {
		return nil
	}
	return &timeline{every: every, rows: make([]tlRow, int(total/every)+2)}
}

func (t *timeline) row(at time.Time) *tlRow {
	if t == nil {
		return nil
	}
	e := t.epoch.Load()
	if e == 0 {
		return nil
	}
	i := int(at.UnixNano()-e) / int(t.every)
	if i < 0 || i >= len(t.rows) {
		return nil
	}
	return &t.rows[i]
}

func (t *timeline) start(at time.Time) {
	if t != nil {
		t.epoch.Store(at.UnixNano())
	}
}

// slot records a send slot scheduled at and sent at sent.
func (t *timeline) slot(at, sent time.Time) {
	if r := t.row(at); r != nil {
		r.slots.Add(1)
	}
	if r := t.row(sent); r != nil {
		r.sends.Add(1)
		if sent.Sub(at) > t.every {
			r.late.Add(1)
		}
	}
}

func (t *timeline) write(failed, throttled bool) {
	r := t.row(time.Now())
	if r == nil {
		return
	}
	switch {
	case throttled:
		r.throttled.Add(1)
	case failed:
		r.condFailed.Add(1)
		r.writes.Add(1)
	default:
		r.writes.Add(1)
	}
}

func (t *timeline) ended(p limiter.Path) {
	if r := t.row(time.Now()); r != nil && int(p) >= 0 && int(p) < tlPaths {
		r.paths[p].Add(1)
	}
}

// print writes one line per interval, and the busiest second of sends and
// of writes (sliding by one interval).
func (t *timeline) print(w io.Writer) {
	if t == nil {
		return
	}
	last := len(t.rows) - 1
	for last > 0 && t.rows[last].slots.Load() == 0 && t.rows[last].writes.Load() == 0 {
		last--
	}
	used := [tlPaths]bool{}
	for i := 0; i <= last; i++ {
		for p := range used {
			used[p] = used[p] || t.rows[i].paths[p].Load() > 0
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "ms\tslots\tsends\tlate\twrites\tfailed\tthrottled\t")
	for p := range used {
		if used[p] {
			fmt.Fprintf(tw, "%s\t", limiter.Path(p))
		}
	}
	fmt.Fprintln(tw)
	per := int(time.Second / t.every)
	var maxSends, maxWrites, sends, writes int64
	for i := 0; i <= last; i++ {
		r := &t.rows[i]
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t", time.Duration(i)*t.every/time.Millisecond, r.slots.Load(), r.sends.Load(),
			r.late.Load(), r.writes.Load(), r.condFailed.Load(), r.throttled.Load())
		for p := range used {
			if used[p] {
				fmt.Fprintf(tw, "%d\t", r.paths[p].Load())
			}
		}
		fmt.Fprintln(tw)
		sends += r.sends.Load()
		writes += r.writes.Load()
		if i >= per {
			sends -= t.rows[i-per].sends.Load()
			writes -= t.rows[i-per].writes.Load()
		}
		maxSends, maxWrites = max(maxSends, sends), max(maxWrites, writes)
	}
	tw.Flush()
	fmt.Fprintf(w, "busiest second: %d sends, %d writes (windows aligned to %v)\n", maxSends, maxWrites, t.every)
}
