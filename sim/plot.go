package sim

import (
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// WriteSVG draws r's timeline as a self-contained SVG: admitted, rejected,
// offered, unavailable (store failures, fail-closed) and throttled requests
// per second against the limit's rate on the left axis, and the shard count
// (a step line) on the right axis.
func (r *Report) WriteSVG(out io.Writer) error {
	if r == nil {
		return errors.New("sim: WriteSVG of a nil Report")
	}
	const (
		W, H                   = 960, 480
		left, right, top, bott = 80, 70, 56, 56
	)
	pw, ph := float64(W-left-right), float64(H-top-bott)
	step := float64(r.TimelineStepMs) / 1000
	if step <= 0 {
		step = 1
	}
	n := len(r.Timeline)
	tEnd := float64(r.SimDurationMs) / 1000
	if tEnd <= 0 {
		tEnd = float64(n) * step
	}
	// The rates per second, in drawing order (admitted on top).
	series := []struct {
		color string
		count func(Second) uint64
		v     []float64
	}{{"#9ecae1", func(s Second) uint64 { return s.Offered }, nil}, {"#e67e22", func(s Second) uint64 { return s.Rejected }, nil},
		{"#d62728", func(s Second) uint64 { return s.Throttled }, nil}, {"#9467bd", func(s Second) uint64 { return s.Unavailable }, nil},
		{"#2a9d2a", func(s Second) uint64 { return s.Admitted }, nil}}
	ymax := r.LimitRate
	maxShard := int64(1)
	for i, s := range r.Timeline {
		for k := range series {
			series[k].v = append(series[k].v, float64(series[k].count(s))/step)
			ymax = max(ymax, series[k].v[i])
		}
		maxShard = max(maxShard, s.ShardCount)
	}
	ymax = niceCeil(ymax * 1.08)
	smax := float64(2) // a power of two above the largest count: its line stays off the border
	for smax <= float64(maxShard) {
		smax *= 2
	}
	x := func(t float64) float64 { return float64(left) + pw*t/math.Max(tEnd, 1e-9) }
	y := func(v float64) float64 { return float64(top) + ph*(1-v/ymax) }
	ys := func(v float64) float64 { return float64(top) + ph*(1-v/smax) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	title := fmt.Sprintf("%s — seed %d, %d writers, %g req/s offered", r.Scenario, r.Seed, r.Writers, r.Rate)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	// grid and left axis
	for i := 0; i <= 5; i++ {
		v := ymax * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", left, W-right, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-6, y(v), fmtNum(v))
	}
	for s := float64(0); s <= smax; s = nextShardTick(s, smax) {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" dominant-baseline="middle" fill="#1f5fa8">%g</text>`+"\n", W-right+6, ys(s), s)
	}
	// x axis
	for _, t := range timeTicks(tEnd) {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999"/>`+"\n", x(t), x(t), H-bott, H-bott+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(t), H-bott+18, fmtDur(t))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", left, top, pw, ph)
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">simulated time</text>`+"\n", float64(left)+pw/2, H-12)
	fmt.Fprintf(&b, `<text transform="translate(18 %.0f) rotate(-90)" text-anchor="middle">requests per second</text>`+"\n", float64(top)+ph/2)
	fmt.Fprintf(&b, `<text transform="translate(%d %.0f) rotate(90)" text-anchor="middle" fill="#1f5fa8">shard count</text>`+"\n", W-14, float64(top)+ph/2)
	// the tail
	if r.TailMs > 0 {
		ts := float64(r.SimDurationMs-r.TailMs) / 1000
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%.0f" fill="#f4f8ff"/>`+"\n", x(ts), top, x(tEnd)-x(ts), ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#777">fault-free tail</text>`+"\n", x(ts)+4, top+14)
	}
	if r.LimitRate > 0 {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="6 4"/>`+"\n", left, W-right, y(r.LimitRate), y(r.LimitRate))
	}
	for _, sr := range series {
		if n == 0 {
			break
		}
		var p strings.Builder
		for i, v := range sr.v {
			fmt.Fprintf(&p, "%.1f,%.1f ", x((float64(i)+0.5)*step), y(v))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6"  points="%s"/>`+"\n", sr.color, strings.TrimSpace(p.String()))
	}
	// shard count as a step line
	if n > 0 {
		var p strings.Builder
		prev := float64(max(r.Timeline[0].ShardCount, 1))
		fmt.Fprintf(&p, "%.1f,%.1f ", x(0), ys(prev))
		for i, s := range r.Timeline {
			v := float64(max(s.ShardCount, 1))
			if v != prev {
				fmt.Fprintf(&p, "%.1f,%.1f %.1f,%.1f ", x(float64(i)*step), ys(prev), x(float64(i)*step), ys(v))
				prev = v
			}
		}
		fmt.Fprintf(&p, "%.1f,%.1f", x(tEnd), ys(prev))
		fmt.Fprintf(&b, `<polyline fill="none" stroke="#1f5fa8" stroke-width="2" stroke-dasharray="2 2" points="%s"/>`+"\n", p.String())
	}
	// legend
	type item struct{ name, color, dash string }
	legend := []item{{"admitted/s", "#2a9d2a", ""}, {"offered/s", "#9ecae1", ""}, {"rejected/s", "#e67e22", ""},
		{"throttled requests/s", "#d62728", ""}, {"unavailable/s", "#9467bd", ""}, {"shard count (right)", "#1f5fa8", "2 2"}}
	if r.LimitRate > 0 {
		legend = append(legend, item{"limit", "#555", "6 4"})
	}
	lx := float64(left)
	for _, it := range legend {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="40" y2="40" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`, lx, lx+18, it.color, it.dash)
		fmt.Fprintf(&b, `<text x="%.0f" y="44">%s</text>`+"\n", lx+22, it.name)
		lx += 30 + 7*float64(len(it.name))
	}
	status := "all invariants hold"
	if len(r.Violations) > 0 {
		status = fmt.Sprintf("%d invariant violation(s)", len(r.Violations))
	}
	fmt.Fprintf(&b, `<text x="%d" y="20" text-anchor="end" fill="#555">%s · shards %d · trace %s</text>`+"\n", W-right, status, r.ShardCountFinal, r.TraceHash)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(out, b.String())
	return err
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func nextShardTick(s, smax float64) float64 {
	if smax <= 8 {
		return s + 1
	}
	if s == 0 {
		return smax / 8
	}
	return s * 2
}

func timeTicks(end float64) []float64 {
	if end <= 0 {
		return nil
	}
	candidates := []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400,
		7 * 86400, 30 * 86400, 60 * 86400, 91 * 86400}
	step := candidates[len(candidates)-1]
	for _, c := range candidates {
		if end/c <= 10 {
			step = c
			break
		}
	}
	var out []float64
	for t := 0.0; t <= end+1e-9; t += step {
		out = append(out, t)
	}
	return out
}

func fmtDur(sec float64) string {
	switch {
	case sec >= 86400 && math.Mod(sec, 86400) == 0:
		return fmt.Sprintf("%gd", sec/86400)
	case sec >= 3600 && math.Mod(sec, 3600) == 0:
		return fmt.Sprintf("%gh", sec/3600)
	}
	return (time.Duration(sec * float64(time.Second))).String()
}

func fmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", math.Round(v/1e5)/10)
	case v >= 1e4:
		return fmt.Sprintf("%gk", math.Round(v/100)/10)
	}
	return fmt.Sprintf("%g", math.Round(v*10)/10)
}
