package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter"
)

func init() {
	register(&command{path: "acquire", admin: true, args: "ENTITY RESOURCE", minArgs: 2, maxArgs: 2,
		short: "take tokens as a request would (exit 1 when rate limited): to try limits out",
		setup: func(c *cmdCtx) func() error {
			consume := c.fs.String("consume", "", "tokens per limit, e.g. rpm=1,tpm=500 (required)")
			also := c.fs.String("also", "", "more resources the same acquire charges, all or none, e.g. all-models (comma-separated, at most 15)")
			var defaults limitFlags
			c.fs.Var(&defaults, "limit", "a limit the request carries (name:rate/period[:burst], e.g. rpm:100/min), used when none is stored; repeat for several")
			return func() error { return acquire(c, *consume, *also, defaults) }
		}})
}

func parseConsume(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, part := range strings.Split(s, ",") {
		name, n, ok := strings.Cut(strings.TrimSpace(part), "=")
		v, err := strconv.ParseInt(n, 10, 64)
		if !ok || name == "" || err != nil {
			return nil, fmt.Errorf("--consume %q: %q must be name=tokens, e.g. rpm=1", s, part)
		}
		out[name] = v
	}
	return out, nil
}

func acquire(c *cmdCtx, consume, also string, defaults limitFlags) error {
	if consume == "" {
		return usageErrorf("acquire needs --consume, e.g. --consume rpm=1,tpm=500")
	}
	amounts, err := parseConsume(consume)
	if err != nil {
		return usageErrorf("%v", err)
	}
	limits, err := parseLimits(defaults)
	if err != nil {
		return usageErrorf("--limit: %v", err)
	}
	lim, err := c.limiter()
	if err != nil {
		return err
	}
	entity, resource := c.args[0], c.args[1]
	if limits == nil {
		// Without --limit, the request carries the bucket's own limits, as
		// the service that wrote it last did; stored limits win anyway.
		bs, err := c.adm.Buckets(c.ctx, entity, resource)
		if err != nil {
			return err
		}
		if len(bs) > 0 {
			limits = bs[0].Limits
		}
	}
	var others []string
	if also != "" {
		others = strings.Split(also, ",")
	}
	_, err = lim.Acquire(c.ctx, limiter.Request{Entity: entity, Resource: resource, Also: others, Limits: limits, Consume: amounts})
	var rl *limiter.RateLimitedError
	var ve *limiter.ValidationError
	switch {
	case errors.As(err, &rl):
		return refused(c, rl, resource)
	case errors.As(err, &ve) && strings.HasPrefix(ve.Field, "Request.Also"):
		return usageErrorf("--also: %v", err)
	case err != nil:
		return err
	}
	ev := c.last
	if c.json() {
		return c.printJSON(map[string]any{"admitted": true, "mode": ev.Mode, "left_out": ev.LeftOut, "would_refuse": ev.WouldRefuse})
	}
	var charged []string
	for _, r := range append([]string{resource}, others...) {
		if !slices.Contains(ev.LeftOut, r) {
			charged = append(charged, r)
		}
	}
	if len(charged) == 0 {
		fmt.Fprintf(c.stdout, "Admitted: %s took nothing: every resource is in admit mode.\n", entity)
		return nil
	}
	fmt.Fprintf(c.stdout, "Admitted: %s took %s on %s.\n", entity, consume, strings.Join(charged, " and "))
	if len(ev.LeftOut) > 0 {
		fmt.Fprintf(c.stdout, "Left out (admit mode, not charged): %s.\n", strings.Join(ev.LeftOut, ", "))
	}
	if len(ev.WouldRefuse) > 0 {
		fmt.Fprintf(c.stdout, "Would have been refused by shadow limits (not charged by this acquire): %s.\n", strings.Join(ev.WouldRefuse, ", "))
	}
	return nil
}

// refusedLimit is a limit that refused an acquire, in -o json output.
type refusedLimit struct {
	Limit        limitJSON `json:"limit"`
	Requested    int64     `json:"requested"`
	Remaining    int64     `json:"remaining"`
	RetryAfterMs int64     `json:"retry_after_ms"`
}

// refused prints which limits refused an acquire of resource (the
// parent's, for a cascade; another resource's, with --also), what they
// hold and when to retry; exit code 1.
func refused(c *cmdCtx, rl *limiter.RateLimitedError, resource string) error {
	var out []refusedLimit
	for _, s := range rl.Limits {
		if s.Exceeded {
			out = append(out, refusedLimit{toJSON(s.Limit), s.Requested, s.Remaining, s.RetryAfter.Milliseconds()})
		}
	}
	if c.json() {
		_ = c.printJSON(map[string]any{"admitted": false, "retry_after_ms": rl.RetryAfter.Milliseconds(),
			"parent": rl.Parent, "resource": rl.Resource, "refused_by": out})
		return &failure{}
	}
	whose := ""
	if rl.Parent {
		whose = "the parent " + strconv.Quote(rl.Entity) + "'s "
	}
	on := ""
	if rl.Resource != resource {
		on = " on " + strconv.Quote(rl.Resource)
	}
	for _, s := range rl.Limits {
		if s.Exceeded {
			fmt.Fprintf(c.stdout, "Refused by %slimit %v%s: requested %d, remaining %d, enough in %v.\n",
				whose, s.Limit, on, s.Requested, s.Remaining, s.RetryAfter.Round(time.Millisecond))
		}
	}
	fmt.Fprintf(c.stdout, "Rate limited: retry after %v.\n", rl.RetryAfter.Round(time.Millisecond))
	return &failure{}
}
