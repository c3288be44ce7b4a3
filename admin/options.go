package admin

import (
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Admin changes and reads a namespace's configuration: entities, stored
// limits, audit records, usage snapshots, buckets. It is safe for
// concurrent use; the zero Admin is not usable: create one with New.
type Admin struct {
	st        store.Store
	ns        string
	clock     limiter.Clock
	principal string
	retention time.Duration
	lim       *limiter.Limiter // WithLimiter's, or nil: its Invalidate and ForgetBucket do nothing on nil
}

// Option configures an Admin.
type Option func(*Admin)

// WithNamespace sets the namespace (default "default"), as the limiters'
// limiter.WithNamespace: an Admin changes only its own namespace.
func WithNamespace(ns string) Option { return func(a *Admin) { a.ns = ns } }

// WithClock sets the clock audit records are dated by and DeleteNamespace
// paces its deletes by, sleeping with it when it is a limiter.Sleeper
// (default: the system clock).
func WithClock(c limiter.Clock) Option { return func(a *Admin) { a.clock = c } }

// WithLimiter gives the Admin a limiter of the same process and namespace
// to keep up to date: every change drops the limiter's cache of entities
// and stored limits (limiter.Limiter.Invalidate), and ResetBucket makes it
// forget the bucket (limiter.Limiter.ForgetBucket). Limiters in other
// processes see changes when their cache entries expire
// (limiter.WithCacheTTL, 60 s by default) or when they are invalidated.
func WithLimiter(l *limiter.Limiter) Option { return func(a *Admin) { a.lim = l } }

// New returns an Admin over st. It does no I/O.
func New(st store.Store, opts ...Option) (*Admin, error) {
	a := &Admin{st: st, ns: "default", clock: systemClock{}, retention: DefaultAuditRetention}
	for _, o := range opts {
		if o != nil {
			o(a)
		}
	}
	if st == nil {
		return nil, invalid("store", "must not be nil")
	}
	if !keys.ValidNamespace(a.ns) {
		return nil, invalid("Namespace", "%q %s", a.ns, keys.RuleNamespace)
	}
	if a.clock == nil {
		return nil, invalid("WithClock", "clock must not be nil")
	}
	if a.retention < 0 {
		return nil, invalid("WithAuditRetention", "%v must not be negative (0 keeps audit records forever)", a.retention)
	}
	return a, nil
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
