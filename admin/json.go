package admin

import (
	"fmt"

	"github.com/shardlimit/limiter/internal/keys"
)

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
