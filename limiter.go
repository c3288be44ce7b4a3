package limiter

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/shardlimit/limiter/internal/engine"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// Limiter enforces token-bucket limits whose state lives in a store. It is
// safe for concurrent use; create one per process (per namespace) and share
// it: what it remembers of buckets (shard counts, the last item of each
// shard, entity configuration, stored limits) saves round trips.
//
// The zero Limiter is not usable; create one with New.
type Limiter struct {
	st  store.Store
	cfg config

	rng     *lockedRand
	mem     *engine.Memory // what the write engine knows of buckets
	pools   *engine.Pools  // reservations (nil when off)
	breaker breaker

	meta metaCache
}

// New returns a limiter over st. It does no I/O: the table's schema
// version is checked on the first call that reads entity configuration.
func New(st store.Store, opts ...Option) (*Limiter, error) {
	cfg := config{namespace: "default", clock: systemClock{}, cacheTTL: 60 * time.Second, policy: FailClosed,
		memorySize: engine.DefaultMemorySize}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if st == nil {
		return nil, invalid("store", "must not be nil")
	}
	if !keys.ValidNamespace(cfg.namespace) {
		return nil, invalid("Namespace", "%q %s", cfg.namespace, keys.RuleNamespace)
	}
	if cfg.clock == nil {
		return nil, invalid("WithClock", "clock must not be nil")
	}
	if err := checkLimits("WithDefaultLimits", cfg.defaults); err != nil {
		return nil, err
	}
	if cfg.cacheTTL < 0 {
		return nil, invalid("WithCacheTTL", "%v must not be negative", cfg.cacheTTL)
	}
	if cfg.policy != FailClosed && cfg.policy != FailOpen {
		return nil, invalid("WithPolicy", "must be FailClosed or FailOpen")
	}
	if cfg.memorySize < 1 {
		return nil, invalid("WithMemorySize", "%d must be at least 1", cfg.memorySize)
	}
	if cfg.rand == nil {
		cfg.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	l := &Limiter{st: st, cfg: cfg, rng: &lockedRand{r: cfg.rand}, mem: engine.NewMemory(cfg.memorySize)}
	if cfg.reserve != nil {
		for _, n := range cfg.reserve.names {
			if !keys.ValidLimitName(n) {
				return nil, invalid("WithReservations", "limit name %q %s", n, keys.RuleLimitName)
			}
		}
		l.pools = engine.NewPools()
	}
	l.meta.init(cfg.cacheTTL)
	return l, nil
}

// usable returns a ValidationError for a nil or zero Limiter or a nil ctx:
// what every method taking a context checks before anything else.
func (l *Limiter) usable(ctx context.Context) error {
	if l == nil || l.st == nil {
		return invalid("Limiter", "is nil or zero: create one with New")
	}
	return checkCtx(ctx)
}

// checkCtx returns a ValidationError for a nil ctx.
func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", "is nil: pass a context (context.Background() when there is none)")
	}
	return nil
}

func (l *Limiter) nowMs() int64 { return l.cfg.clock.Now().UnixMilli() }

// lockedRand makes a *rand.Rand safe for the limiter's goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// IntN and Float64 unlock with defer: the source is the caller's
// (WithRand) and may panic; a caller that recovers must not find every
// later acquire blocked on the lock.

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}
