package aggregator

import (
	"fmt"
	"strings"
	"time"

	"github.com/shardlimit/limiter/internal/keys"
)

// Window is the span of a usage snapshot, aligned on UTC.
type Window uint8

// The snapshot windows. The zero Window is none of them, and is refused.
const (
	Hourly  = Window(keys.WindowHour)  // a UTC hour
	Daily   = Window(keys.WindowDay)   // a UTC day, from midnight
	Monthly = Window(keys.WindowMonth) // a UTC calendar month, from the 1st
)

// DefaultWindows are the windows a Processor writes unless told otherwise.
var DefaultWindows = []Window{Hourly, Daily}

// DefaultRetention returns how long snapshots of window w live after the
// window ends, unless told otherwise: 31 days for hourly, 400 days for
// daily and 5 years (of 366 days) for monthly snapshots.
func DefaultRetention(w Window) time.Duration {
	switch w {
	case Hourly:
		return 31 * 24 * time.Hour
	case Daily:
		return 400 * 24 * time.Hour
	case Monthly:
		return 5 * 366 * 24 * time.Hour
	}
	return 0
}

// String returns "hourly", "daily" or "monthly".
func (w Window) String() string {
	if a := keys.UsageWindow(w).Adjective(); a != "" {
		return a
	}
	return fmt.Sprintf("Window(%d)", uint8(w))
}

// ParseWindow parses "hourly", "daily" or "monthly" (or "hour", "day",
// "month"), in any case.
func ParseWindow(s string) (Window, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "hourly", "hour":
		return Hourly, nil
	case "daily", "day":
		return Daily, nil
	case "monthly", "month":
		return Monthly, nil
	}
	return 0, fmt.Errorf("aggregator: unknown window %q (want hourly, daily or monthly)", s)
}
