// Package httplimit is net/http middleware over a [limiter.Limiter]: each
// request is charged to a bucket before the handler runs, refused with 429
// when a limit lacks tokens, and told its state in the RateLimit header
// fields.
//
//	mw, err := httplimit.New(lim, apiKey,
//		httplimit.WithLimits(limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000)),
//		httplimit.WithCost(estimateTokens))
//	http.Handle("/v1/chat", mw.Handler(chat))
//
// For each request the middleware
//
//  1. asks the [KeyFunc] for the entity and resource (an error answers 400,
//     or the status of a [RequestError]; an empty entity skips limiting);
//  2. asks the [CostFunc] for the tokens to take per limit (default: one of
//     each limit given to [WithLimits]);
//  3. calls Acquire: one conditional write on the hot path, whose answer
//     carries every limit's state, so the headers cost no extra round trip;
//  4. on admission, runs the handler with the lease in the request's
//     context, setting the RateLimit-Policy and RateLimit fields when the
//     handler starts its answer; then settles the lease: Adjust by the
//     difference between the cost the handler reported with [ReportCost]
//     and the estimate, then Commit;
//  5. on refusal, sets the fields and Retry-After and answers 429 with an
//     application/problem+json body (RFC 9457) naming the limits exceeded.
//
// When the store fails, the limiter's policy decides: under fail-open the
// handler runs (without RateLimit fields: a lease granted that way has no
// state), under fail-closed the answer is 503 with a problem body.
//
// # The header fields
//
// They follow the IETF draft "RateLimit header fields for HTTP",
// draft-ietf-httpapi-ratelimit-headers-11
// (https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers-11/):
// two structured-field lists with one item per limit, named by the limit's
// name as a String (a cascade parent's with [ParentPrefix]). The items
// come in the same order on every answer: the limits given to [WithLimits]
// in that order, then any other limit that applied (a stored one) in name
// order, then the cascade parent's limits the same way.
//
//	RateLimit-Policy: "rpm";q=100;w=60, "tpm";q=10000;qu="tokens";w=60
//	RateLimit: "rpm";r=99;t=1, "tpm";r=9500;t=1
//
// In RateLimit-Policy, q is the limit's burst and w the seconds it takes
// to refill it from empty, rounded up (when that is under a second, w is 1
// and q what the limit refills in a second); qu is the quota unit given
// with [WithQuotaUnits], left out for requests, the draft's default. A
// concurrency cap (limiter.Limit with Window "concurrent") is q requests
// in flight, qu="concurrent-requests" (unless WithQuotaUnits names
// another), with no w. The limits are those that applied: stored
// overrides included.
//
// In RateLimit, r is the units available (never below 0) and t the
// seconds, rounded up, until one more unit is: the time within which the
// client can use no more than r. A token bucket refills continuously, so
// an emptied 60-a-minute limit says r=0;t=1, not the minute it takes to
// refill whole; a full one says t is the time one unit takes. Both come
// from the item the acquire's write returned (for a sharded bucket,
// estimates: see limiter.LimitState). A refusal caps every t at its
// Retry-After. The optional partition key ("pk") is not sent.
// [ExposeLimits] chooses which limits appear.
//
// The fields of an admitted request are set when the handler first writes
// (WriteHeader, Write or Flush), or after it returns when it wrote
// nothing: a cost reported with [ReportCost] before then counts, as the
// Adjust after the handler will charge it. What the handler reports after
// it has started its answer, a streamed one for instance, cannot reach the
// fields: the draft forbids them in trailers, and the header section is
// gone by then; those fields show the estimate.
package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shardlimit/limiter"
)

// KeyFunc returns the entity a request is limited as (an API key, hashed
// into a valid id, a user, a tenant) and the resource it uses (a model, a
// route). An error answers the request with its [RequestError] status, or
// 400; its message is the problem's detail, shown to the client. An empty
// entity and a nil error let the request through unlimited, without
// header fields (health checks, internal callers).
type KeyFunc func(r *http.Request) (entity, resource string, err error)

// CostFunc returns the tokens a request takes per limit name
// (limiter.Request.Consume): an estimate the handler may correct with
// [ReportCost]. An error answers as for [KeyFunc]. A function that reads
// the request body must put back what it read for the handler.
type CostFunc func(r *http.Request) (map[string]int64, error)

// ErrorHandler answers a request the middleware does not pass to the
// handler. err is a *limiter.RateLimitedError (the RateLimit fields and
// Retry-After are already set), a *[RequestError], an
// *limiter.UnavailableError, or another error of the limiter. The default
// is [WriteError].
type ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

// Middleware rate-limits the requests of the handlers it wraps. Create it
// with [New]; it is safe for concurrent use.
type Middleware struct {
	lim           *limiter.Limiter
	key           KeyFunc
	cost          CostFunc
	limits        []limiter.Limit
	policy        limiter.Policy
	logger        *slog.Logger
	onError       ErrorHandler
	fields        fields
	adjustTimeout time.Duration
	also          func(r *http.Request) ([]string, error)
}

// Option configures a Middleware.
type Option func(*Middleware)

// WithLimits sets the limits each request is charged against
// (limiter.Request.Limits). Limits stored for the entity or resource
// override them (see admin.Scope); without any, only stored limits
// apply.
func WithLimits(limits ...limiter.Limit) Option {
	return func(m *Middleware) { m.limits = append([]limiter.Limit(nil), limits...) }
}

// WithCost sets the cost function. The default (also for a nil f) takes
// one token of each limit given to WithLimits; without WithLimits, a cost
// function is required.
func WithCost(f CostFunc) Option { return func(m *Middleware) { m.cost = f } }

// WithPolicy overrides the limiter's unavailability policy for these
// requests (limiter.Request.Policy); the default, and
// limiter.PolicyDefault, follow the limiter.
func WithPolicy(p limiter.Policy) Option { return func(m *Middleware) { m.policy = p } }

// WithLogger sets the logger (default slog.Default()): Error for requests
// answered 500, Warn for a settlement (Adjust) that failed. New refuses a
// nil l.
func WithLogger(l *slog.Logger) Option { return func(m *Middleware) { m.logger = l } }

// WithErrorHandler replaces [WriteError], for example to answer in an
// API's own error format. It may call WriteError for the errors it does
// not handle. New refuses a nil h.
func WithErrorHandler(h ErrorHandler) Option { return func(m *Middleware) { m.onError = h } }

// ExposeLimits shows only the named limits in the RateLimit fields (a
// cascade parent's as "parent/NAME"); with no names, the fields are not
// sent at all. The default shows every limit. A name no limit has is
// ignored. Retry-After and the 429 body are sent regardless.
func ExposeLimits(names ...string) Option {
	return func(m *Middleware) {
		set := make(map[string]bool, len(names))
		for _, n := range names {
			set[n] = true
		}
		m.fields.keep = func(name string) bool { return set[name] }
	}
}

// WithShadowLimits shows shadow limits (limiter.Limit.Shadow) in the
// RateLimit fields too. By default they are left out: a shadow limit
// refuses nothing, so a client pacing itself by it would slow down for a
// limit that is only being watched.
func WithShadowLimits(show bool) Option { return func(m *Middleware) { m.fields.shadow = show } }

// WithQuotaUnits says what the named limits count, by limit name: the
// "qu" parameter of their RateLimit-Policy items, such as
// {"tpm": "tokens"}. A cascade parent's limit has the unit of the limit of
// its name. A limit without a unit counts requests ([UnitRequests], the
// draft's default, sent without "qu"). The draft registers
// [UnitRequests], [UnitContentBytes] and [UnitConcurrentRequests]; any
// other unit is sent as given, and a client that knows only the registered
// ones may not understand it. A unit is lowercase letters, digits and '-',
// starting with a letter, at most 64 characters.
func WithQuotaUnits(units map[string]string) Option {
	return func(m *Middleware) { m.fields.units = maps.Clone(units) }
}

// WithAlso sets a function returning the resources each request also
// charges, beside the key function's (limiter.Request.Also: all of them or
// none, in one round trip; at most 15, none named twice). An error it
// returns answers the request as a key function's does. In the RateLimit
// fields of an admitted request, the limits of these resources are named
// "RESOURCE/NAME" (a cascade parent's "parent/RESOURCE/NAME"); a refusal's
// fields and body describe the bucket that refused
// (limiter.RateLimitedError.Resource), its limits named as for a request
// of that resource alone. A nil f (the default) charges no other
// resource.
func WithAlso(f func(r *http.Request) ([]string, error)) Option {
	return func(m *Middleware) { m.also = f }
}

// WithAdjustTimeout bounds the Adjust that settles a lease after the
// handler (default 2 s). It runs even when the client has gone away. New
// refuses a d of 0 or less.
func WithAdjustTimeout(d time.Duration) Option { return func(m *Middleware) { m.adjustTimeout = d } }

// New returns middleware that limits requests with lim, keyed by key. It
// checks the options: a nil limiter or key function, an invalid limit, or
// no cost function without limits is an error.
func New(lim *limiter.Limiter, key KeyFunc, opts ...Option) (*Middleware, error) {
	m := &Middleware{lim: lim, key: key, logger: slog.Default(), onError: WriteError, adjustTimeout: 2 * time.Second}
	for _, o := range opts {
		if o != nil {
			o(m)
		}
	}
	switch {
	case lim == nil:
		return nil, errors.New("httplimit: the limiter is nil")
	case key == nil:
		return nil, errors.New("httplimit: the key function is nil")
	case m.cost == nil && len(m.limits) == 0:
		return nil, errors.New("httplimit: WithCost is required without WithLimits")
	case m.logger == nil || m.onError == nil:
		return nil, errors.New("httplimit: WithLogger and WithErrorHandler need a non-nil argument")
	case m.adjustTimeout <= 0:
		return nil, errors.New("httplimit: WithAdjustTimeout needs a positive duration")
	case m.policy > limiter.FailOpen:
		return nil, fmt.Errorf("httplimit: WithPolicy: unknown policy %d", m.policy)
	}
	m.fields.rank = make(map[string]int, len(m.limits))
	for i, l := range m.limits {
		if err := l.Validate(); err != nil {
			return nil, errors.Join(errors.New("httplimit: WithLimits"), err)
		}
		m.fields.rank[l.Name] = i
	}
	for _, name := range slices.Sorted(maps.Keys(m.fields.units)) {
		if u := m.fields.units[name]; !validUnit(u) {
			return nil, fmt.Errorf("httplimit: WithQuotaUnits: the unit of %q is %q: it must be lowercase letters, digits and '-', starting with a letter, at most 64 characters", name, u)
		}
	}
	if m.cost == nil {
		one := make(map[string]int64, len(m.limits))
		for _, l := range m.limits {
			one[l.Name] = 1
		}
		m.cost = func(*http.Request) (map[string]int64, error) { return one, nil }
	}
	return m, nil
}

// Handler returns next wrapped by the middleware. On a nil or zero
// Middleware (not made by New), or with a nil next, the handler answers
// every request 500 through WriteError, without calling anything.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	var misuse error
	switch {
	case m == nil || m.lim == nil:
		misuse = errors.New("httplimit: the Middleware is nil or zero: create one with New")
	case next == nil:
		misuse = errors.New("httplimit: Handler(nil): the handler to wrap is nil")
	}
	if misuse != nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { WriteError(w, r, misuse) })
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entity, resource, err := m.key(r)
		if err == nil && entity == "" {
			next.ServeHTTP(w, r)
			return
		}
		var consume map[string]int64
		if err == nil {
			consume, err = m.cost(r)
		}
		var also []string
		if err == nil && m.also != nil {
			also, err = m.also(r)
		}
		if err != nil {
			m.onError(w, r, asRequestError(err))
			return
		}
		lease, err := m.lim.Acquire(r.Context(), limiter.Request{Entity: entity, Resource: resource, Also: also,
			Limits: m.limits, Consume: consume, Policy: m.policy})
		if err != nil {
			m.refuse(w, r, err)
			return
		}
		u := &usage{lease: lease, charged: consume}
		defer m.settle(r, u)
		fw := &fieldsWriter{ResponseWriter: w, set: func() { m.fields.setLease(w.Header(), lease, u.delta()) }}
		next.ServeHTTP(fw, r.WithContext(context.WithValue(r.Context(), usageKey{}, u)))
		fw.start() // the handler wrote nothing: net/http answers 200 with the fields
	})
}

// refuse answers a request Acquire did not admit.
func (m *Middleware) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var rl *limiter.RateLimitedError
	var ve *limiter.ValidationError
	switch {
	case errors.As(err, &rl):
		m.fields.setRefusal(w.Header(), rl)
	case errors.As(err, &ve) && fromRequest(ve.Field):
		err = &RequestError{Status: http.StatusBadRequest, Err: err}
	case r.Context().Err() != nil:
		// The client went away: nobody reads the answer.
		m.logger.Debug("httplimit: request ended before its acquire", "err", err)
	case !errors.Is(err, limiter.ErrUnavailable) && !errors.Is(err, limiter.ErrDisabled):
		m.logger.Error("httplimit: acquire failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	m.onError(w, r, err)
}

// fromRequest reports whether a validation error is about what the key and
// cost functions derived from the request (a client error), rather than
// the middleware's configuration.
func fromRequest(field string) bool {
	return field == "Request.Entity" || field == "Request.Resource" || strings.HasPrefix(field, "Request.Also") ||
		strings.HasPrefix(field, "Request.Consume[")
}

// validUnit reports whether u is a quota unit WithQuotaUnits accepts.
func validUnit(u string) bool {
	return len(u) > 0 && len(u) <= 64 && u[0] >= 'a' && u[0] <= 'z' &&
		strings.Trim(u, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

func asRequestError(err error) error {
	var re *RequestError
	if errors.As(err, &re) {
		return err
	}
	return &RequestError{Status: http.StatusBadRequest, Err: err}
}

// settle adjusts the lease by the cost the handler reported, then commits
// it. A lease the handler ended itself is left alone.
func (m *Middleware) settle(r *http.Request, u *usage) {
	if delta := u.delta(); len(delta) > 0 {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), m.adjustTimeout)
		err := u.lease.Adjust(ctx, delta)
		cancel()
		if err != nil && !errors.Is(err, limiter.ErrLeaseEnded) {
			m.logger.Warn("httplimit: adjusting to the reported cost failed", "method", r.Method, "path", r.URL.Path,
				"delta", delta, "err", err)
		}
	}
	_ = u.lease.Commit() // ErrLeaseEnded: the handler ended it
}
