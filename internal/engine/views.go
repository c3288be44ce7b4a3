package engine

import (
	"math"

	"github.com/shardlimit/limiter/bucket"
)

// View is one application limit of a bucket as an answer saw it, in
// millitokens and milliseconds: what the root package reports as a
// LimitState.
type View struct {
	Name   string
	Shards int64
	// Requested is what the call asked of the limit.
	Requested int64
	// Remaining is the shard's balance times the shard count, saturating:
	// an estimate of the whole bucket from the one shard a write sees.
	Remaining int64
	// ResetMs is the time until the shard is full again.
	ResetMs int64
	// RetryMs is the time until Requested fits, for a judged view; -1
	// when no wait suffices on this shard (the request exceeds a shard's
	// burst: another shard may serve it).
	RetryMs  int64
	Exceeded bool
}

// Views returns the state of every application limit of the plan, in
// name order, as the image shows it at now for a bucket of n shards.
// charge deducts the plan's charge (an image from before a write that
// returned none); judge judges the request against it (a refusal).
func (p *Plan) Views(im *Image, n, now int64, charge, judge bool) []View {
	out := make([]View, 0, len(p.specs)-1)
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden {
			continue
		}
		v := View{Name: s.name, Shards: n, Requested: s.amount}
		if im == nil {
			out = append(out, v)
			continue
		}
		st, rf := im.projected(s, n, now)
		if charge {
			st.Tokens -= s.amount
		}
		v.Remaining = satMul(st.Tokens, n)
		if full := st.FullAt(rf); full > now {
			v.ResetMs = full - now
		}
		if judge && !s.free && st.Tokens < s.amount {
			v.Exceeded = true
			if w, ok := st.RetryAfter(rf, now, s.amount); ok {
				v.RetryMs = w
			} else {
				v.RetryMs = -1
			}
		}
		out = append(out, v)
	}
	out = append(out, p.quotaViews(im, n, now, charge, judge)...)
	return append(out, p.capViews(im, n, now, charge, judge)...)
}

// Views returns the refusal's per-limit state (judged). With the view the
// refusal was judged from, what the other writers take counts: a local
// refusal's tokens are fewer by what they (and this process's writes in
// flight) have likely taken since the image, and every refusal's wait is
// until the request fits at the refill the others leave (at least
// 1/minAccrual of it; at the limit, pace of it and a share of the tokens
// in view, see withheld), not at the whole refill they compete for.
func (r *Refusal) Views() []View {
	vs := r.Plan.Views(r.Img, r.N, r.Now, false, true)
	if r.Local || r.Remembered {
		// Judged from the memory's image: a cap refuses only in the store
		// (its slots come back by releases no image shows).
		for i := range vs {
			if r.Plan.hasCap(vs[i].Name) {
				vs[i].Exceeded, vs[i].RetryMs = false, 0
			}
		}
	}
	if r.View == nil || r.Img == nil {
		return vs
	}
	j := 0
	for i := range r.Plan.specs {
		s := &r.Plan.specs[i]
		if s.hidden {
			continue
		}
		v := &vs[j]
		j++
		if s.free {
			continue
		}
		st, _ := r.Img.projected(s, r.N, r.Now)
		tokens := st.Tokens
		switch {
		case r.Own:
			// As the decision: only this process's writes in flight count
			// (the refusal may be another limit's, a quota spent or a
			// shadow limit short, and these must not send the caller back
			// to wait on a guess).
			tokens -= r.View.Pending[s.name]
			v.Remaining = satMul(tokens, r.N)
		case r.Local || r.Outrun:
			tokens -= r.View.expected(s, r.N, r.Now) + r.View.withheld(s, r.N, r.Img, r.View.At, r.Now)
			v.Remaining = satMul(tokens, r.N)
		}
		if r.Outrun && !r.Own && tokens >= s.amount && s.amount > 0 && (r.Raced || r.View.contended(s, r.N)) {
			// Refused at the limit after lost races: the tokens in view go
			// to the others; this acquire waits for its share of the refill.
			tokens = 0
		}
		if tokens >= s.amount {
			continue
		}
		v.Exceeded = true
		l := s.perShard(r.N)
		if s.amount > l.Burst {
			v.RetryMs = -1
			continue
		}
		if !r.Local && !r.Outrun {
			// Refused by the store on this limit: the tokens in view are
			// short, and at the limit the others take their part of them.
			tokens -= r.View.withheld(s, r.N, r.Img, r.Now, r.Now)
		}
		accrual := r.View.accrual(s, r.N)
		v.RetryMs = max(v.RetryMs, int64(math.Ceil(float64(s.amount-tokens)/accrual)))
	}
	return vs
}

// satMul is a*b saturating at the int64 limits (b >= 1).
func satMul(a, b int64) int64 {
	if b <= 1 || a == 0 {
		return a
	}
	if a > 0 && a > math.MaxInt64/b {
		return math.MaxInt64
	}
	if a < 0 && a < math.MinInt64/b {
		return math.MinInt64
	}
	return a * b
}

// Total sums one limit's balance over the images of every shard of a
// bucket at now (a shard never written holds its burst when it is shard
// 0, nothing otherwise), and the longest time any shard needs to be full:
// what a status read reports.
func (p *Plan) Total(name string, images []*Image, n, now int64) (remaining, resetMs int64, ok bool) {
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden || s.name != name {
			continue
		}
		var sum int64
		for shard, im := range images {
			if im == nil {
				if shard == 0 {
					sum = satAdd(sum, s.orig.PerShard(n).Burst)
				}
				continue
			}
			m := max(n, im.shardCount)
			st, rf := im.projected(s, m, now)
			sum = satAdd(sum, st.Tokens)
			if full := st.FullAt(rf); full > now {
				resetMs = max(resetMs, full-now)
			}
		}
		return sum, resetMs, true
	}
	for i := range p.quotas {
		q := &p.quotas[i]
		if q.name != name {
			continue
		}
		var sum int64
		for shard, im := range images {
			if im == nil {
				if shard == 0 {
					_, end := q.cal.Bounds(now)
					sum, resetMs = satAdd(sum, q.share(n)), max(resetMs, end-now)
				}
				continue
			}
			qs := *q // what a write would start the window at here
			qs.onShard(shard, images[0])
			left, end := im.quotaLeft(&qs, max(n, im.shardCount), now)
			sum = satAdd(sum, left)
			resetMs = max(resetMs, end-now)
		}
		return sum, resetMs, true
	}
	for i := range p.caps {
		c := &p.caps[i]
		if c.name != name {
			continue
		}
		var sum int64
		for shard, im := range images {
			m := n
			if im != nil {
				m = max(n, im.shardCount)
			}
			r, ok := im.ring(c)
			switch {
			case ok:
				e := c.epoch(now)
				sum += max(0, c.share(m)-r.live(e)) * bucket.MilliPerToken
				reset, _ := c.waits(&r, ok, e, now, 0)
				resetMs = max(resetMs, reset)
			case shard == 0 || im != nil:
				sum += c.share(m) * bucket.MilliPerToken
			}
		}
		return sum, resetMs, true
	}
	return 0, 0, false
}
