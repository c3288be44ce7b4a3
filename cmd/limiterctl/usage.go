package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shardlimit/limiter/admin"
	"github.com/shardlimit/limiter/internal/keys"
)

func init() {
	for _, u := range []struct {
		name, short string
		run         func(*cmdCtx, admin.UsageQuery) error
	}{
		{"list", "consumption per window (from the aggregator's snapshots), with a bar per window", usageList},
		{"summary", "consumption per limit over the range: total, peak window and a sparkline", usageSummary},
	} {
		register(&command{path: "usage " + u.name, admin: true, args: "ENTITY RESOURCE", minArgs: 2, maxArgs: 2, short: u.short,
			setup: func(c *cmdCtx) func() error {
				window := c.fs.String("window", "hourly", "hourly, daily or monthly")
				since := c.fs.Duration("since", 24*time.Hour, "the range ends now (or at --to) and starts this long before")
				from := c.fs.String("from", "", "start of the range (RFC 3339, 2006-01-02T15 or 2006-01-02, UTC); overrides --since")
				to := c.fs.String("to", "", "end of the range, exclusive (default now)")
				limit := c.fs.String("limit", "", "only this limit")
				return func() error {
					q, err := usageQuery(c, *window, *since, *from, *to, *limit)
					if err != nil {
						return err
					}
					return u.run(c, q)
				}
			}})
	}
}

var windowNames = map[string]admin.UsageWindow{
	"hourly": admin.UsageHourly, "hour": admin.UsageHourly, "daily": admin.UsageDaily, "day": admin.UsageDaily,
	"monthly": admin.UsageMonthly, "month": admin.UsageMonthly,
}

func usageQuery(c *cmdCtx, window string, since time.Duration, from, to, limit string) (admin.UsageQuery, error) {
	q := admin.UsageQuery{Entity: c.args[0], Resource: c.args[1], Limit: limit}
	w, ok := windowNames[window]
	if !ok {
		return q, usageErrorf("--window %q: want hourly, daily or monthly", window)
	}
	q.Window = w
	var err error
	q.To = time.Now().UTC()
	if to != "" {
		if q.To, err = parseTime(to); err != nil {
			return q, usageErrorf("--to %q: %v", to, err)
		}
	}
	if since <= 0 {
		return q, usageErrorf("--since %v: want a positive duration such as 24h", since)
	}
	q.From = q.To.Add(-since)
	if from != "" {
		if q.From, err = parseTime(from); err != nil {
			return q, usageErrorf("--from %q: %v", from, err)
		}
	}
	return q, nil
}

func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("want RFC 3339 (2026-01-05T07:00:00Z), 2026-01-05T07 or 2026-01-05")
}

type usageRow struct {
	Limit  string    `json:"limit"`
	Window string    `json:"window"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Tokens int64     `json:"tokens"`
	Events int64     `json:"events"`
}

func readUsage(c *cmdCtx, q admin.UsageQuery) ([]admin.UsageSnapshot, error) {
	snaps, err := c.adm.Usage(c.ctx, q)
	if err != nil {
		return nil, err
	}
	if len(snaps) == 0 && !c.json() {
		fmt.Fprintf(c.stderr, "No usage recorded for %s on %s between %s and %s. Usage comes from the aggregator (docs/aggregator.md): is it running on the table's stream?\n",
			q.Entity, q.Resource, q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	}
	return snaps, nil
}

func usageList(c *cmdCtx, q admin.UsageQuery) error {
	snaps, err := readUsage(c, q)
	if err != nil {
		return err
	}
	if c.json() {
		return c.printJSON(mapped(snaps, func(s admin.UsageSnapshot) usageRow {
			return usageRow{s.Limit, s.Window.String(), s.Start, s.End, s.Tokens, s.Events}
		}))
	}
	peak := map[string]int64{}
	for _, s := range snaps {
		peak[s.Limit] = max(peak[s.Limit], s.Tokens)
	}
	w := c.tabular("WINDOW START (UTC)", "LIMIT", "TOKENS", "EVENTS", "")
	for _, s := range snaps {
		row(w, s.Start.Format(windowLayout(q.Window)), s.Limit, s.Tokens, s.Events, bar(s.Tokens, peak[s.Limit], 30))
	}
	return w.Flush()
}

func windowLayout(w admin.UsageWindow) string {
	switch w {
	case admin.UsageDaily:
		return "2006-01-02"
	case admin.UsageMonthly:
		return "2006-01"
	}
	return "2006-01-02 15:00"
}

// bar is a horizontal bar of v against top, width characters at most.
func bar(v, top int64, width int) string {
	if v <= 0 || top <= 0 {
		return ""
	}
	n := int((v*int64(width) + top - 1) / top)
	return strings.Repeat("█", min(n, width))
}

type usageSummaryJSON struct {
	Limit     string    `json:"limit"`
	Tokens    int64     `json:"tokens"`
	Events    int64     `json:"events"`
	Windows   int       `json:"windows_with_usage"`
	PeakStart time.Time `json:"peak_start"`
	Peak      int64     `json:"peak_tokens"`
	Series    []int64   `json:"series"`
}

// usageSummary totals each limit over the range and draws one sparkline
// character per window of the range (windows without usage are blank).
func usageSummary(c *cmdCtx, q admin.UsageQuery) error {
	snaps, err := readUsage(c, q)
	if err != nil {
		return err
	}
	w := keys.UsageWindow(q.Window)
	var starts []time.Time
	for s := w.Start(q.From); s.Before(q.To); s = w.End(s) {
		starts = append(starts, s)
	}
	index := map[time.Time]int{}
	for i, s := range starts {
		index[s] = i
	}
	sums := map[string]*usageSummaryJSON{}
	for _, s := range snaps {
		u := sums[s.Limit]
		if u == nil {
			u = &usageSummaryJSON{Limit: s.Limit, Series: make([]int64, len(starts))}
			sums[s.Limit] = u
		}
		u.Tokens += s.Tokens
		u.Events += s.Events
		u.Windows++
		if s.Tokens > u.Peak || u.PeakStart.IsZero() {
			u.Peak, u.PeakStart = s.Tokens, s.Start
		}
		if i, ok := index[s.Start]; ok {
			u.Series[i] = s.Tokens
		}
	}
	out := mapped(slices.Sorted(maps.Keys(sums)), func(n string) usageSummaryJSON { return *sums[n] })
	if c.json() {
		return c.printJSON(out)
	}
	fmt.Fprintf(c.stdout, "%s on %s, %s windows from %s to %s:\n", q.Entity, q.Resource, q.Window,
		q.From.Format(time.RFC3339), q.To.Format(time.RFC3339))
	tw := c.tabular("LIMIT", "TOKENS", "EVENTS", "PEAK WINDOW", "PEAK", "PER WINDOW")
	for _, u := range out {
		row(tw, u.Limit, u.Tokens, u.Events, u.PeakStart.Format(windowLayout(q.Window)), u.Peak, sparkline(u.Series, 72))
	}
	return tw.Flush()
}

var sparks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws series, one character per value (values summed into at
// most width characters); zero is a space.
func sparkline(series []int64, width int) string {
	if len(series) > width {
		per := (len(series) + width - 1) / width
		var folded []int64
		for i := 0; i < len(series); i += per {
			var sum int64
			for _, v := range series[i:min(i+per, len(series))] {
				sum += v
			}
			folded = append(folded, sum)
		}
		series = folded
	}
	var top int64
	for _, v := range series {
		top = max(top, v)
	}
	var b strings.Builder
	for _, v := range series {
		if v <= 0 || top <= 0 {
			b.WriteByte(' ')
			continue
		}
		b.WriteRune(sparks[min(int((v*int64(len(sparks))-1)/top), len(sparks)-1)])
	}
	return strings.TrimRight(b.String(), " ")
}
