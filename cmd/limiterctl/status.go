package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/admin"
)

func init() {
	register(&command{path: "status", admin: true, args: "ENTITY [RESOURCE...]", minArgs: 1, maxArgs: -1,
		short: "limits, tokens available (summed over shards), shard count and time to full of an entity's buckets (every one, or those of the RESOURCEs)",
		setup: func(c *cmdCtx) func() error {
			var defaults limitFlags
			c.fs.Var(&defaults, "limit", "a limit your service requests (name:rate/period[:burst], e.g. rpm:100/min); repeat for several. "+
				"Used when nothing is stored for the bucket; default: the limits the bucket was last written with")
			return func() error { return status(c, defaults) }
		}})
}

// limitFlags is a repeatable --limit flag.
type limitFlags []string

func (f *limitFlags) String() string     { return strings.Join(*f, " ") }
func (f *limitFlags) Set(s string) error { *f = append(*f, s); return nil }

// limitState is one limit of a bucket as status shows it.
type limitState struct {
	Limit     limitJSON `json:"limit"`
	Available int64     `json:"available"`
	// TimeToFull is how long until the bucket holds its burst again, if
	// nothing is consumed meanwhile (whole tokens, rounded up).
	TimeToFull   time.Duration `json:"-"`
	TimeToFullMs int64         `json:"time_to_full_ms"`
}

type bucketStatus struct {
	Entity   string `json:"entity"`
	Resource string `json:"resource"`
	Exists   bool   `json:"exists"`
	Shards   int    `json:"shards"`
	// StoredFor lists the scopes with limits stored for this bucket, most
	// specific first; Request says which limits status passed as the
	// request's: "--limit", "the bucket" (those it was last written with)
	// or "" (none needed).
	StoredFor []string `json:"stored_for"`
	// Mode is the bucket's mode (enforce, admit or refuse) and ModeOf the
	// scope that sets it ("" for enforce by default).
	Mode    string       `json:"mode"`
	ModeOf  string       `json:"mode_of,omitempty"`
	Request string       `json:"request_limits"`
	Limits  []limitState `json:"limits"`
	// LastTopUp is the bucket's newest top-up in the audit trail.
	LastTopUp *auditJSON `json:"last_top_up,omitempty"`
	topUp     admin.AuditRecord
}

func status(c *cmdCtx, defaults limitFlags) error {
	given, err := parseLimits(defaults)
	if err != nil {
		return usageErrorf("--limit: %v", err)
	}
	entity, resources := c.args[0], c.args[1:]
	var buckets []admin.BucketInfo
	if len(resources) == 0 {
		if buckets, err = c.adm.Buckets(c.ctx, entity, ""); err != nil {
			return err
		}
	}
	for _, resource := range resources {
		bs, err := c.adm.Buckets(c.ctx, entity, resource)
		if err != nil {
			return err
		}
		if len(bs) == 0 {
			bs = []admin.BucketInfo{{Entity: entity, Resource: resource}} // never written, expired or reset: full
		}
		buckets = append(buckets, bs...)
	}
	if len(buckets) == 0 {
		return fmt.Errorf("entity %q has no buckets in namespace %q (never charged, expired or reset); name a RESOURCE to see its limits", entity, c.namespace)
	}
	recs, err := c.adm.Audit(c.ctx, admin.AuditQuery{Entity: entity, Limit: 1000})
	if err != nil {
		return err
	}
	var out []bucketStatus
	for _, b := range buckets {
		st, err := bucketState(c, b, given)
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(recs, func(r admin.AuditRecord) bool {
			return r.Action == admin.AuditTopUp && r.Scope.Resource == b.Resource
		}); i >= 0 {
			j := toAuditJSON(recs[i])
			st.LastTopUp, st.topUp = &j, recs[i]
		}
		out = append(out, st)
	}
	if c.json() {
		return c.printJSON(out)
	}
	w := c.tabular("RESOURCE", "SHARDS", "LIMIT", "AVAILABLE", "BURST", "RATE", "FULL IN", "STORED FOR")
	for _, b := range out {
		shards := fmt.Sprint(b.Shards)
		if !b.Exists {
			shards = "- (full)"
		}
		for _, l := range b.Limits {
			name := l.Limit.Name
			if l.Limit.Shadow {
				name += " (shadow)"
			}
			rate := fmt.Sprintf("%d/%s", l.Limit.Refill, l.Limit.Period)
			if l.Limit.Window != "" { // a calendar quota: its window, full again at its end
				rate = fmt.Sprintf("%d/%s", l.Limit.Capacity, l.Limit.Window)
			}
			row(w, b.Resource, shards, name, l.Available, l.Limit.Burst,
				rate, roundDuration(l.TimeToFull), orDash(strings.Join(b.StoredFor, ", ")))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, b := range out {
		if b.ModeOf != "" {
			m := admin.Mode(b.Mode)
			fmt.Fprintf(c.stdout, "Mode of %s: %s, set on the %s: %s.\n", b.Resource, b.Mode, b.ModeOf, modeMeaning(m))
		}
		if t := b.topUp; t.After != nil {
			fmt.Fprintf(c.stdout, "Last top-up of %s: %s by %s: %s.\n", b.Resource, t.At.Format("2006-01-02 15:04:05"), t.Principal, topUpText(t))
		}
	}
	return nil
}

// bucketState reads one bucket's balance. The request's limits it passes
// are --limit, else those the bucket was last written with; the limiter
// resolves the stored ones over them, as for an acquire.
func bucketState(c *cmdCtx, b admin.BucketInfo, given []limiter.Limit) (bucketStatus, error) {
	st := bucketStatus{Entity: b.Entity, Resource: b.Resource, Exists: b.Shards > 0, Shards: b.Shards}
	var err error
	if st.StoredFor, st.Mode, st.ModeOf, err = storedScopes(c, b.Entity, b.Resource); err != nil {
		return st, err
	}
	defaults := given
	switch {
	case len(given) > 0:
		st.Request = "--limit"
	case len(b.Limits) > 0:
		st.Request, defaults = "the bucket", b.Limits
	case len(st.StoredFor) == 0:
		return st, usageErrorf("no limits stored for %s on %s and the bucket holds none: pass the limits your service requests with --limit", b.Entity, b.Resource)
	}
	lim, err := c.limiter()
	if err != nil {
		return st, err
	}
	states, err := lim.Status(c.ctx, b.Entity, b.Resource, defaults)
	if err != nil {
		return st, err
	}
	for _, a := range states {
		full := timeToFull(a.Limit, a.Remaining)
		if a.Limit.Window != "" {
			full = a.Reset // a calendar quota is whole again when its window ends
		}
		st.Limits = append(st.Limits, limitState{Limit: toJSON(a.Limit), Available: a.Remaining, TimeToFull: full, TimeToFullMs: full.Milliseconds()})
	}
	return st, nil
}

// storedScopes names the scopes with limits stored for (entity,
// resource), most specific first, and returns the mode in force for it
// and the scope that sets it, as an acquire resolves them.
func storedScopes(c *cmdCtx, entity, resource string) (names []string, mode, modeOf string, _ error) {
	mode = modeName(admin.ModeEnforce)
	for _, s := range []struct {
		scope admin.Scope
		name  string
	}{
		{admin.Scope{Entity: entity, Resource: resource}, "entity on resource"},
		{admin.Scope{Entity: entity}, "entity"},
		{admin.Scope{Resource: resource}, "resource"},
	} {
		_, ok, err := c.adm.GetLimits(c.ctx, s.scope)
		if err != nil {
			return nil, "", "", err
		}
		if ok {
			names = append(names, s.name)
		}
		m, err := c.adm.GetMode(c.ctx, s.scope)
		if err != nil {
			return nil, "", "", err
		}
		if m != admin.ModeEnforce && modeOf == "" {
			mode, modeOf = modeName(m), s.name
		}
	}
	return names, mode, modeOf, nil
}

// timeToFull is how long a limit at tokens takes to refill to its burst.
func timeToFull(l limiter.Limit, tokens int64) time.Duration {
	deficit := l.EffectiveBurst() - tokens
	if deficit <= 0 {
		return 0
	}
	// In float: deficit × period overflows int64 for large limits; this is
	// for display, to the millisecond.
	ms := math.Ceil(float64(deficit) / float64(l.Refill) * float64(l.Period.Milliseconds()))
	if ms >= float64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}

func roundDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "full"
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
