package limiter

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
)

// The JSON forms of the data types (see the package documentation).

// duration is a time.Duration as a Go duration string.
type duration time.Duration

func (d duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("limiter: %q is not a duration such as \"1m\" or \"250ms\"", b)
	}
	*d = duration(v)
	return nil
}

func (d *duration) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '"' {
		return fmt.Errorf("limiter: duration %s must be a string such as \"1m\" or \"250ms\"", b)
	}
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return err
	}
	return d.UnmarshalText([]byte(s))
}

// decode unmarshals b as a J and stores conv of it in dst.
func decode[J, T any](b []byte, dst *T, conv func(J) T) error {
	var j J
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*dst = conv(j)
	return nil
}

type limitJSON struct {
	Name     string   `json:"name"`
	Capacity int64    `json:"capacity"`
	Burst    int64    `json:"burst,omitempty"`
	Refill   int64    `json:"refill"`
	Period   duration `json:"period"`
}

// MarshalJSON encodes l as {"name", "capacity", "burst" (left out when 0),
// "refill", "period"}, the period as a duration string.
func (l Limit) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitJSON{l.Name, l.Capacity, l.Burst, l.Refill, duration(l.Period)})
}

// UnmarshalJSON decodes the form MarshalJSON writes.
func (l *Limit) UnmarshalJSON(b []byte) error {
	return decode(b, l, func(j limitJSON) Limit {
		return Limit{Name: j.Name, Capacity: j.Capacity, Burst: j.Burst, Refill: j.Refill, Period: time.Duration(j.Period)}
	})
}

type limitStateJSON struct {
	Limit      Limit    `json:"limit"`
	Shards     int64    `json:"shards"`
	Requested  int64    `json:"requested"`
	Remaining  int64    `json:"remaining"`
	Reserved   int64    `json:"reserved,omitempty"`
	Reset      duration `json:"reset"`
	RetryAfter duration `json:"retry_after"`
	Exceeded   bool     `json:"exceeded"`
}

// MarshalJSON encodes s with its fields in snake_case, Reset and
// RetryAfter as duration strings.
func (s LimitState) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitStateJSON{s.Limit, s.Shards, s.Requested, s.Remaining, s.Reserved, duration(s.Reset), duration(s.RetryAfter), s.Exceeded})
}

// UnmarshalJSON decodes the form MarshalJSON writes.
func (s *LimitState) UnmarshalJSON(b []byte) error {
	return decode(b, s, func(j limitStateJSON) LimitState {
		return LimitState{Limit: j.Limit, Shards: j.Shards, Requested: j.Requested, Remaining: j.Remaining, Reserved: j.Reserved,
			Reset: time.Duration(j.Reset), RetryAfter: time.Duration(j.RetryAfter), Exceeded: j.Exceeded}
	})
}

type entityJSON struct {
	ID      string `json:"id"`
	Parent  string `json:"parent,omitempty"`
	Cascade bool   `json:"cascade,omitempty"`
}

// MarshalJSON encodes e as {"id", "parent", "cascade"}, the last two left
// out when empty.
func (e Entity) MarshalJSON() ([]byte, error) { return json.Marshal(entityJSON(e)) }

// UnmarshalJSON decodes the form MarshalJSON writes.
func (e *Entity) UnmarshalJSON(b []byte) error {
	return decode(b, e, func(j entityJSON) Entity { return Entity(j) })
}

type scopeJSON struct {
	Entity   string `json:"entity,omitempty"`
	Resource string `json:"resource,omitempty"`
}

// MarshalJSON encodes s as {"entity", "resource"}, each left out when
// empty.
func (s Scope) MarshalJSON() ([]byte, error) { return json.Marshal(scopeJSON(s)) }

// UnmarshalJSON decodes the form MarshalJSON writes.
func (s *Scope) UnmarshalJSON(b []byte) error {
	return decode(b, s, func(j scopeJSON) Scope { return Scope(j) })
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
	for _, v := range []UsageWindow{UsageHourly, UsageDaily, UsageMonthly} {
		if v.String() == string(b) {
			*w = v
			return nil
		}
	}
	return fmt.Errorf("limiter: usage window %q must be hourly, daily or monthly", b)
}

type usageQueryJSON struct {
	Entity   string      `json:"entity"`
	Resource string      `json:"resource"`
	Limit    string      `json:"limit,omitempty"`
	Window   UsageWindow `json:"window"`
	From     time.Time   `json:"from"`
	To       time.Time   `json:"to"`
}

// MarshalJSON encodes q as {"entity", "resource", "limit" (left out when
// empty), "window", "from", "to"}.
func (q UsageQuery) MarshalJSON() ([]byte, error) { return json.Marshal(usageQueryJSON(q)) }

// UnmarshalJSON decodes the form MarshalJSON writes.
func (q *UsageQuery) UnmarshalJSON(b []byte) error {
	return decode(b, q, func(j usageQueryJSON) UsageQuery { return UsageQuery(j) })
}

type usageSnapshotJSON struct {
	Entity      string      `json:"entity"`
	Resource    string      `json:"resource"`
	Limit       string      `json:"limit"`
	Window      UsageWindow `json:"window"`
	Start       time.Time   `json:"start"`
	End         time.Time   `json:"end"`
	Tokens      int64       `json:"tokens"`
	Millitokens int64       `json:"millitokens"`
	Events      int64       `json:"events"`
}

// MarshalJSON encodes s with its fields in snake_case.
func (s UsageSnapshot) MarshalJSON() ([]byte, error) { return json.Marshal(usageSnapshotJSON(s)) }

// UnmarshalJSON decodes the form MarshalJSON writes.
func (s *UsageSnapshot) UnmarshalJSON(b []byte) error {
	return decode(b, s, func(j usageSnapshotJSON) UsageSnapshot { return UsageSnapshot(j) })
}
