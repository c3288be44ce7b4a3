package admin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/shardlimit/limiter"
	"github.com/shardlimit/limiter/bucket"
	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// UsageWindow is the span of a usage snapshot, aligned on UTC.
type UsageWindow uint8

// Usage windows. The aggregator writes hourly and daily snapshots by
// default, monthly ones when configured to (see docs/aggregator.md).
// The zero UsageWindow is none of them, and is refused.
const (
	UsageHourly  = UsageWindow(keys.WindowHour)  // a UTC hour
	UsageDaily   = UsageWindow(keys.WindowDay)   // a UTC day, from midnight
	UsageMonthly = UsageWindow(keys.WindowMonth) // a UTC calendar month, from the 1st
)

// String returns "hourly", "daily" or "monthly".
func (w UsageWindow) String() string {
	if a := keys.UsageWindow(w).Adjective(); a != "" {
		return a
	}
	return "invalid"
}

// MarshalText encodes w as "hourly", "daily" or "monthly"; an invalid
// window is an error.
func (w UsageWindow) MarshalText() ([]byte, error) {
	if !keys.UsageWindow(w).Valid() {
		return nil, fmt.Errorf("limiter: invalid UsageWindow %d", w)
	}
	return []byte(w.String()), nil
}

// UnmarshalText decodes "hourly", "daily" or "monthly".
func (w *UsageWindow) UnmarshalText(b []byte) error {
	if w == nil {
		return fmt.Errorf("limiter: usage window: UnmarshalText into a nil *UsageWindow")
	}
	for _, v := range []UsageWindow{UsageHourly, UsageDaily, UsageMonthly} {
		if v.String() == string(b) {
			*w = v
			return nil
		}
	}
	return fmt.Errorf("limiter: usage window %q must be hourly, daily or monthly", b)
}

// UsageQuery selects usage snapshots of one (entity, resource). Its JSON
// form has the fields in snake_case ("limit" left out when empty).
type UsageQuery struct {
	// Entity and Resource identify the bucket, as in limiter.Request
	// (Resource "" is limiter.DefaultResource).
	Entity   string `json:"entity"`
	Resource string `json:"resource"`
	// Limit selects one limit by name; "" selects every limit.
	Limit string `json:"limit,omitempty"`
	// Window is the snapshot span to read; the zero UsageWindow is
	// refused.
	Window UsageWindow `json:"window"`
	// From and To bound the time range: the query returns the windows
	// that overlap [From, To), the first one possibly starting before From.
	// Both must be set (not the zero time), with To after From.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// UsageSnapshot is the consumption of one limit in one window, summed over
// the bucket's shards. Its JSON form has the fields in snake_case.
type UsageSnapshot struct {
	// Entity, Resource and Window are the query's; Limit is the limit's
	// name.
	Entity   string      `json:"entity"`
	Resource string      `json:"resource"`
	Limit    string      `json:"limit"`
	Window   UsageWindow `json:"window"`
	// Start and End (exclusive) delimit the window, in UTC.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Tokens is Millitokens in whole tokens, rounded down.
	Tokens int64 `json:"tokens"`
	// Millitokens is what was consumed in the window: charges minus
	// refunds (Adjust down, Rollback), so it can be negative in a window
	// that only saw refunds of earlier charges.
	Millitokens int64 `json:"millitokens"`
	// Events counts the writes that changed the limit's consumption in the
	// window (acquires, adjusts, rollbacks).
	Events int64 `json:"events"`
}

// maxUsageQueries bounds the store queries of one Usage call: one per day
// for hourly windows, per month for daily ones, per year for monthly ones.
const maxUsageQueries = 100

// Usage returns the recorded consumption of an (entity, resource) per
// window overlapping [q.From, q.To), in order of window start, then limit
// name. Windows without consumption are left out.
//
// The numbers come from the usage snapshots the aggregator
// (cmd/aggregator) writes from the table's change stream: without it
// running there are none, and they lag the acquires by the stream's delay
// (typically a second or less). Usage issues one eventually consistent
// Query per day (hourly windows), month (daily) or year (monthly) of the
// range, at most 100; a longer range is a *ValidationError.
func (a *Admin) Usage(ctx context.Context, q UsageQuery) ([]UsageSnapshot, error) {
	if err := a.begin(ctx); err != nil {
		return nil, err
	}
	if q.Resource == "" {
		q.Resource = limiter.DefaultResource
	}
	if err := checkUsageQuery(q); err != nil {
		return nil, err
	}
	w := keys.UsageWindow(q.Window)
	first := w.Start(q.From)
	pk := keys.UsagePK(a.ns, q.Entity)
	type key struct {
		start time.Time
		limit string
	}
	sums := make(map[key]*UsageSnapshot)
	for p := first; p.Before(q.To); {
		prefix, next := w.Period(p)
		out, err := a.st.Query(ctx, store.QueryInput{PartitionKey: pk, SortKeyPrefix: keys.UsageSKPrefix(w, q.Resource, prefix)})
		if err != nil {
			return nil, storeErr(ctx, "usage", err)
		}
		for _, it := range out.Items {
			sk, _ := it.Str(store.AttrSK)
			iw, res, start, _, ok := keys.ParseUsageSK(sk)
			if !ok || iw != w || res != q.Resource || start.Before(first) || !start.Before(q.To) {
				continue
			}
			for name, v := range it {
				limit, events, ok := keys.ParseUsageAttr(name)
				n, isNum := v.AsInt()
				if !ok || !isNum || q.Limit != "" && limit != q.Limit || limit == keys.HiddenLimit {
					continue
				}
				s := sums[key{start, limit}]
				if s == nil {
					s = &UsageSnapshot{Entity: q.Entity, Resource: q.Resource, Limit: limit, Window: q.Window,
						Start: start, End: w.End(start)}
					sums[key{start, limit}] = s
				}
				if events {
					s.Events = bucket.AddSat(s.Events, n)
				} else {
					s.Millitokens = bucket.AddSat(s.Millitokens, n)
				}
			}
		}
		p = next
	}
	res := make([]UsageSnapshot, 0, len(sums))
	for _, s := range sums {
		s.Tokens = bucket.WholeTokens(s.Millitokens)
		res = append(res, *s)
	}
	slices.SortFunc(res, func(x, y UsageSnapshot) int {
		return cmp.Or(x.Start.Compare(y.Start), cmp.Compare(x.Limit, y.Limit))
	})
	return res, nil
}

func checkUsageQuery(q UsageQuery) error {
	if err := cmp.Or(checkEntity("UsageQuery.Entity", q.Entity), checkResource("UsageQuery.Resource", q.Resource)); err != nil {
		return err
	}
	if q.Limit != "" {
		if !keys.ValidLimitName(q.Limit) {
			return invalid("UsageQuery.Limit", "%q must be empty (every limit) or match ^[a-zA-Z][a-zA-Z0-9_.\\-]{0,63}$", q.Limit)
		}
		if q.Limit == keys.HiddenLimit {
			return invalid("UsageQuery.Limit", `"wcu" is the limiter's own write limit; it has no usage`)
		}
	}
	if !keys.UsageWindow(q.Window).Valid() {
		return invalid("UsageQuery.Window", "%d must be UsageHourly, UsageDaily or UsageMonthly", q.Window)
	}
	if q.From.IsZero() || !keys.UsageTimeOK(q.From) {
		return invalid("UsageQuery.From", "%v must be set, between 1970 and 9999", q.From)
	}
	if q.To.IsZero() || !keys.UsageTimeOK(q.To) && !q.To.Equal(keys.MaxUsageTime) {
		return invalid("UsageQuery.To", "%v must be set, between 1970 and 10000", q.To)
	}
	if !q.To.After(q.From) {
		return invalid("UsageQuery.To", "%v must be after From (%v)", q.To, q.From)
	}
	w := keys.UsageWindow(q.Window)
	n := 0
	for p := w.Start(q.From); p.Before(q.To); _, p = w.Period(p) {
		if n++; n > maxUsageQueries {
			unit := map[keys.UsageWindow]string{keys.WindowHour: "days", keys.WindowDay: "months", keys.WindowMonth: "years"}[w]
			return invalid("UsageQuery.To", "the range spans more than %d %s; a %v query covers at most %d",
				maxUsageQueries, unit, q.Window, maxUsageQueries)
		}
	}
	return nil
}
