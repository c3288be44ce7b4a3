package limiter

import (
	"context"
	"errors"
	"time"

	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// trace accumulates what one call cost, for the observer.
type trace struct {
	ev    Event
	start time.Time // for Event.Duration: see callStart
}

func (t *trace) add(c store.Capacity, err error) {
	t.ev.RoundTrips++
	t.ev.ReadUnits += c.ReadUnits
	t.ev.WriteUnits += c.WriteUnits
	if errors.Is(err, store.ErrThrottled) {
		t.ev.Throttled++
	}
}

// outcome of charging one shard.
type shardResult uint8

const (
	charged   shardResult = iota // tokens taken
	exhausted                    // an application limit lacks tokens (rl set)
	hot                          // the wcu limit lacks tokens even after refill
	moved                        // the shard count grew: choose again (n set)
	failed                       // a store error (err set)
)

type shardOutcome struct {
	res shardResult
	n   int64             // the shard count learned
	rl  *RateLimitedError // for exhausted
	err error             // for failed
	img *image            // the item after a successful write
}

// maxSlowAttempts bounds the writes after the first one fails. Each
// failure returns the fresh item, and each means another writer
// succeeded, so the loop only runs long under extreme contention.
const maxSlowAttempts = 10

// chargeShard runs the write paths against one shard until the charge is
// made, refused, or the store fails. seen is this client's last view of
// the shard (nil for none).
func (l *Limiter) chargeShard(ctx context.Context, tr *trace, p *plan, ref keys.Bucket, n int64, seen *image) shardOutcome {
	key := ref.Key()
	now := l.nowMs()
	var ex store.Expr
	var err error
	ex, tr.ev.Path, err = p.blind(seen, n, now)
	if err != nil {
		return shardOutcome{res: failed, err: err}
	}
	out, err := l.update(ctx, tr, key, ex)
	if err == nil {
		return l.success(ref, out, n)
	}
	im, err := l.conditionImage(err)
	if err != nil {
		return shardOutcome{res: failed, err: err}
	}
	// A blind full write that failed lost a race (its image said full); a
	// blind speculative write may only have found the bucket full, which
	// says nothing unless the bucket is known to be busy.
	contended := tr.ev.Path == PathFull || seen != nil && seen.busy(p, n)
	wcu := &p.specs[len(p.specs)-1]
	defer func(amount int64) { wcu.amount = amount }(wcu.amount)
	for attempt := 0; attempt < maxSlowAttempts; attempt++ {
		now = l.nowMs()
		// DynamoDB bills a failed conditional write like a successful one:
		// the next write charges the partition's hidden limit for both.
		wcu.amount += bucket.MilliPerToken
		if im == nil {
			tr.ev.Path = PathCreate
			put := p.create(ref, n, now)
			out, err := l.st.Put(ctx, put)
			tr.add(out.Consumed, err)
			if err == nil {
				img, _ := decodeImage(put.Item)
				l.remember(ref, img, n)
				if ref.Shard != 0 {
					// A new shard starts empty: this request is served elsewhere.
					return shardOutcome{res: exhausted, n: n, rl: p.rateLimited(img, n, now)}
				}
				return shardOutcome{res: charged, n: n, img: img}
			}
			if im, err = l.conditionImage(err); err != nil {
				return shardOutcome{res: failed, err: err}
			}
			continue
		}
		if im.shardCount > n {
			// The bucket doubled since we last looked: the other writers
			// that have not learned it yet crowd the old shards (all of
			// them shard 0, for a client that knew one shard). Spread out
			// at the new count rather than join them here.
			l.remember(ref, im, im.shardCount)
			return shardOutcome{res: moved, n: im.shardCount}
		}
		if ref.Shard == 0 {
			n = im.shardCount // shard 0 is the authority
		}
		switch short := p.shortfall(im, n, now, seen.hot()); {
		case short == shortApp:
			l.remember(ref, im, n)
			tr.ev.Path = PathReject
			return shardOutcome{res: exhausted, n: n, rl: p.rateLimited(im, n, now)}
		case short == shortWCU:
			l.remember(ref, im, n)
			return shardOutcome{res: hot, n: n}
		}
		if ex, tr.ev.Path, err = p.informed(im, n, now, contended); err != nil {
			return shardOutcome{res: failed, err: err}
		}
		out, err := l.update(ctx, tr, key, ex)
		if err == nil {
			return l.success(ref, out, n)
		}
		if im, err = l.conditionImage(err); err != nil {
			return shardOutcome{res: failed, err: err}
		}
		contended = true
	}
	// Lost every race: report the latest state as a rejection.
	tr.ev.Path = PathReject
	rl := p.rateLimited(im, n, l.nowMs())
	if rl.RetryAfter <= 0 {
		rl.RetryAfter = time.Millisecond
	}
	return shardOutcome{res: exhausted, n: n, rl: rl}
}

func (l *Limiter) update(ctx context.Context, tr *trace, key store.Key, ex store.Expr) (store.WriteOutput, error) {
	out, err := l.st.Update(ctx, store.UpdateInput{
		Key: key, Expr: ex, Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true,
	})
	tr.add(out.Consumed, err)
	return out, err
}

func (l *Limiter) success(ref keys.Bucket, out store.WriteOutput, n int64) shardOutcome {
	img, err := decodeImage(out.Attributes)
	if err != nil {
		return shardOutcome{res: failed, err: err}
	}
	if img != nil && (ref.Shard == 0 || img.shardCount > n) {
		n = img.shardCount
	}
	l.remember(ref, img, n)
	return shardOutcome{res: charged, n: n, img: img}
}

// conditionImage turns a condition failure into the item it returned (nil
// when there was none); any other error is returned as is.
func (l *Limiter) conditionImage(err error) (*image, error) {
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) {
		return nil, err
	}
	return decodeImage(cf.Item)
}

type shortKind uint8

const (
	shortNone shortKind = iota
	shortApp
	shortWCU
)

// projected returns what limit s holds at now under this plan (new limits
// start full), per shard.
func (im *image) projected(s *spec, n, now int64) (st bucket.State, rf int64) {
	l := s.perShard(n)
	old, _, _, ok := im.state(s)
	if !ok {
		return bucket.State{Limit: l, Tokens: l.Burst}, now
	}
	// A writer with a faster clock may have moved rf past our now: nothing
	// refills before rf, so waits count from max(rf, now).
	at := max(im.rf, now)
	eff := min(old.Effective(im.rf, now), l.Burst)
	return bucket.State{Limit: l, Tokens: eff}, at
}

// shortfall says whether the image lacks tokens for the plan even after
// refill: an application limit first (a real rejection), else wcu (a hot
// partition).
//
// wcu counts as short only when busy: this client's own estimate of the
// shard's write rate (image.hot) says the shard is near its ceiling. A
// client whose clock lags sees no refill since rf, and rf stands still
// while consumption-only writes run, so its wcu view can be empty while
// the shard is not hot (found by the property tests: ±1 s of skew, a
// parent bucket doubled at 765 writes a second).
func (p *plan) shortfall(im *image, n, now int64, busy bool) shortKind {
	kind := shortNone
	for i := range p.specs {
		s := &p.specs[i]
		at := now
		if s.hidden {
			// wcu is a heuristic, not an admission bound: judge it at the
			// latest time anyone has written (true time is at least rf), so
			// a client whose clock lags does not see a busy partition.
			at = max(now, im.rf)
		}
		st, _ := im.projected(s, n, at)
		if st.Tokens >= s.amount {
			continue
		}
		if !s.hidden {
			return shortApp
		}
		if busy {
			kind = shortWCU
		}
	}
	return kind
}

// blind returns the first write of an acquire, made without reading: the
// full reset when this client's last view of the item says the bucket is
// full by now, else the speculative charge.
func (p *plan) blind(seen *image, n, now int64) (store.Expr, Path, error) {
	if seen != nil && seen.matches(p, n) && seen.fullBy(p, n, now) && !seen.busy(p, n) {
		ex, err := p.full(n, now, 0)
		return ex, PathFull, err
	}
	ex, err := p.speculative(n, now)
	return ex, PathSpeculative, err
}

// hotRate is the write rate (writes per ms) at which a client's own
// estimate says a shard is hot: 80 % of the partition ceiling.
const hotRate = 0.8

// hot reports whether this client's estimate of the shard's write rate
// (measured between two of its images, on its own clock, so that clock
// skew cancels) is near the partition ceiling. A nil image is not hot.
func (im *image) hot() bool { return im != nil && im.wpm >= hotRate }

// busy reports whether, at the write rate this client last estimated for
// the shard, another writer's full write has likely opened a cushion
// (paths.go) since the image was taken: the bucket is then probably not
// full, and the consumption-only write is the better guess.
func (im *image) busy(p *plan, n int64) bool {
	return im.wpm*float64(2*p.cushion(n)) >= 0.5
}

// informed returns the write to make knowing the item as it stands (the
// image a failed write returned), cheapest contention first: the full
// reset when every limit is full (it needs no lock: its conditions hold
// for exactly one writer per refill), with a cushion when this acquire
// already lost a race (paths.go); consumption only when the stored tokens
// suffice; else refill and consume under the rf lock. The caller has
// checked that the tokens suffice.
func (p *plan) informed(im *image, n, now int64, contended bool) (store.Expr, Path, error) {
	if im.matches(p, n) && im.fullBy(p, n, now) {
		h := int64(0)
		if contended {
			h = p.cushion(n)
		}
		ex, err := p.full(n, now, h)
		return ex, PathFull, err
	}
	if p.retryable(im, n, now) {
		ex, err := p.speculative(n, now)
		return ex, PathRetry, err
	}
	ex, err := p.normal(im, n, now, true)
	return ex, PathNormal, err
}

// retryable reports whether the consumption-only write (the speculative
// expression) can succeed on this image: same limits and shard count, the
// stored tokens suffice without any refill, and every charged bucket is
// below its burst (the fl guard). It is preferred even when a refill is
// due: it does not contend for the rf lock, so under contention one writer
// refills and the others consume. Otherwise the normal write is the one.
func (p *plan) retryable(im *image, n, now int64) bool {
	if !im.matches(p, n) {
		return false
	}
	for i := range p.specs {
		s := &p.specs[i]
		st, fl, _, ok := im.state(s)
		if !ok || st.Tokens < s.amount {
			return false
		}
		if s.amount != 0 && !s.hidden && fl <= now {
			return false
		}
	}
	return true
}

// fullBy reports whether, judging by this (possibly stale) image, every
// limit is full at now: the blind full path is then likely to succeed.
func (im *image) fullBy(p *plan, n, now int64) bool {
	for i := range p.specs {
		s := &p.specs[i]
		_, _, fh, ok := im.state(s)
		if !ok || (fh > now && !s.hidden) {
			return false
		}
	}
	return im.rf < now
}

// rateLimited builds the rejection for the image.
func (p *plan) rateLimited(im *image, n, now int64) *RateLimitedError {
	e := &RateLimitedError{Entity: p.ref.Entity, Resource: p.ref.Resource}
	for i := range p.specs {
		s := &p.specs[i]
		if s.hidden {
			continue
		}
		ls := limitState(s, im, n, now, s.amount, true)
		e.RetryAfter = max(e.RetryAfter, ls.RetryAfter)
		e.Limits = append(e.Limits, ls)
	}
	return e
}
