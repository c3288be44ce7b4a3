package limiter

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
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
	if dst == nil {
		return fmt.Errorf("limiter: UnmarshalJSON into a nil %T", dst)
	}
	var j J
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*dst = conv(j)
	return nil
}

type limitJSON struct {
	Name      string   `json:"name"`
	Capacity  int64    `json:"capacity"`
	Burst     int64    `json:"burst,omitempty"`
	Refill    int64    `json:"refill,omitempty"`
	Period    duration `json:"period,omitempty"`
	Window    string   `json:"window,omitempty"`
	TimeZone  string   `json:"time_zone,omitempty"`
	WeekStart int      `json:"week_start,omitempty"`
	MonthDay  int      `json:"month_day,omitempty"`
	Shadow    bool     `json:"shadow,omitempty"`
	TTL       duration `json:"ttl,omitempty"`
}

// MarshalJSON encodes l as {"name", "capacity", "burst" (left out when 0),
// "refill", "period"}, the period as a duration string; a quota as
// {"name", "capacity", "burst", "window", "time_zone", "week_start" (0
// for Sunday), "month_day"}, each left out when 0 or empty; a concurrency
// cap as {"name", "capacity", "window": "concurrent", "ttl"}, the ttl as a
// duration string; any with "shadow" (left out when false).
func (l Limit) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitJSON{l.Name, l.Capacity, l.Burst, l.Refill, duration(l.Period), l.Window, l.TimeZone, int(l.WeekStart), l.MonthDay, l.Shadow, duration(l.TTL)})
}

// UnmarshalJSON decodes the form MarshalJSON writes.
func (l *Limit) UnmarshalJSON(b []byte) error {
	return decode(b, l, func(j limitJSON) Limit {
		return Limit{Name: j.Name, Capacity: j.Capacity, Burst: j.Burst, Refill: j.Refill, Period: time.Duration(j.Period),
			Window: j.Window, TimeZone: j.TimeZone, WeekStart: time.Weekday(j.WeekStart), MonthDay: j.MonthDay, Shadow: j.Shadow, TTL: time.Duration(j.TTL)}
	})
}

type limitStateJSON struct {
	Resource   string   `json:"resource,omitempty"`
	Limit      Limit    `json:"limit"`
	Shards     int64    `json:"shards"`
	Requested  int64    `json:"requested"`
	Remaining  int64    `json:"remaining"`
	Reserved   int64    `json:"reserved,omitempty"`
	Reset      duration `json:"reset"`
	RetryAfter duration `json:"retry_after"`
	Exceeded   bool     `json:"exceeded"`
}

// MarshalJSON encodes s with its fields in snake_case ("resource" left
// out when empty), Reset and RetryAfter as duration strings.
func (s LimitState) MarshalJSON() ([]byte, error) {
	return json.Marshal(limitStateJSON{s.Resource, s.Limit, s.Shards, s.Requested, s.Remaining, s.Reserved, duration(s.Reset), duration(s.RetryAfter), s.Exceeded})
}

// UnmarshalJSON decodes the form MarshalJSON writes.
func (s *LimitState) UnmarshalJSON(b []byte) error {
	return decode(b, s, func(j limitStateJSON) LimitState {
		return LimitState{Resource: j.Resource, Limit: j.Limit, Shards: j.Shards, Requested: j.Requested, Remaining: j.Remaining, Reserved: j.Reserved,
			Reset: time.Duration(j.Reset), RetryAfter: time.Duration(j.RetryAfter), Exceeded: j.Exceeded}
	})
}
