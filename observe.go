package limiter

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/store"
)

// trace accumulates what one call cost, for the observer.
type trace struct {
	ev    Event
	start time.Time
	cause error // the store error behind a fail-open admission
}

func (l *Limiter) newTrace(op, entity, resource string) trace {
	t := trace{ev: Event{Op: op, Entity: entity, Resource: resource}}
	if l.cfg.observer != nil || l.cfg.logger.Enabled(context.Background(), slog.LevelDebug) {
		t.start = l.cfg.clock.Now() // for Event.Duration: no clock read when no one looks
	}
	return t
}

func (t *trace) add(c store.Capacity, err error) {
	t.ev.RoundTrips++
	t.ev.ReadUnits += c.ReadUnits
	t.ev.WriteUnits += c.WriteUnits
	if storeThrottled(err) {
		t.ev.Throttled++
	}
}

func storeThrottled(err error) bool { return errors.Is(err, store.ErrThrottled) }

// path records the write path of an engine step.
func (t *trace) path(p engine.Path) {
	if q, ok := publicPath(p); ok {
		t.ev.Path = q
	}
}

// publicPath maps the engine's paths to the ones an Event reports; the
// discovery reads are not paths of their own (Event.Path names writes).
func publicPath(p Path) (Path, bool) {
	switch p {
	case engine.PathAdjust:
		// An adjust's guarded ADD is the speculative write of a correction.
		return PathSpeculative, true
	case PathNone, engine.PathDiscover, engine.PathUndo:
		return PathNone, false
	}
	return p, true
}

// storeDown reports whether err means the store could not answer
// (unavailable, or throttled past its retries): only then does the
// unavailability policy apply. Anything else (a rate limit, bad input, a
// missing table or permission, an unknown schema, a cancelled context) is
// returned as it is and never failed open.
func storeDown(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrThrottled)
}

// observe tells the observer and the debug log of a finished call; ok is
// its outcome when err is nil (Admitted for an acquire, Succeeded for any
// other call).
func (l *Limiter) observe(tr *trace, err error, ok Outcome) {
	debug := l.cfg.logger.Enabled(context.Background(), slog.LevelDebug)
	if l.cfg.observer == nil && !debug {
		return
	}
	tr.ev.Err = err
	if err == nil && tr.cause != nil {
		tr.ev.Err = tr.cause
	}
	if !tr.start.IsZero() {
		tr.ev.Duration = l.cfg.clock.Now().Sub(tr.start)
	}
	switch {
	case err == nil:
		tr.ev.Outcome = ok
	case errors.Is(err, ErrRateLimited):
		tr.ev.Outcome = Rejected
	case errors.Is(err, ErrDisabled):
		tr.ev.Outcome = Disabled
	case errors.Is(err, ErrInvalid):
		tr.ev.Outcome = Invalid
	default:
		tr.ev.Outcome = Unavailable
	}
	if debug {
		l.cfg.logger.Debug("limiter: "+tr.ev.Op, "entity", tr.ev.Entity, "resource", tr.ev.Resource,
			"outcome", tr.ev.Outcome.String(), "path", tr.ev.Path.String(), "round_trips", tr.ev.RoundTrips,
			"wcu", tr.ev.WriteUnits, "rcu", tr.ev.ReadUnits, "err", tr.ev.Err)
	}
	if l.cfg.observer != nil {
		l.cfg.observer.Observe(tr.ev)
	}
}
