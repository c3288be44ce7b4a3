package admin

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
)

// The JSON forms of the configuration types: snake_case names, windows by
// name ("hourly"). They round-trip.

// decode unmarshals b as a J and stores conv of it in dst.
func decode[J, T any](b []byte, dst *T, conv func(J) T) error {
	var j J
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*dst = conv(j)
	return nil
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
