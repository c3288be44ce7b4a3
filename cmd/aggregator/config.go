package main

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/shardlimit/limiter/aggregator"
)

// Environment variables. docs/aggregator.md documents each.
const (
	envTable           = "AGGREGATOR_TABLE"
	envNamespaces      = "AGGREGATOR_NAMESPACES"
	envWindows         = "AGGREGATOR_WINDOWS"
	envRetentionPrefix = "AGGREGATOR_RETENTION_" // + HOURLY, DAILY, MONTHLY
	envHotPercent      = "AGGREGATOR_HOT_PERCENT"
	envMaxShards       = "AGGREGATOR_MAX_SHARDS"
	envShardCooldown   = "AGGREGATOR_SHARD_COOLDOWN"
	envReportMalformed = "AGGREGATOR_REPORT_MALFORMED"
	envLogLevel        = "AGGREGATOR_LOG_LEVEL"
)

// config is the function's configuration, read from the environment.
type config struct {
	table    string
	opts     aggregator.Options
	logLevel slog.Level
}

// loadConfig reads the configuration through getenv (os.Getenv in
// production) and reports the first variable that is wrong.
func loadConfig(getenv func(string) string) (config, error) {
	var c config
	c.table = strings.TrimSpace(getenv(envTable))
	if c.table == "" {
		return c, fmt.Errorf("%s must name the limiter's table", envTable)
	}
	c.opts.Namespaces = splitList(getenv(envNamespaces))

	c.opts.Windows = aggregator.DefaultWindows
	if v := getenv(envWindows); strings.TrimSpace(v) != "" {
		c.opts.Windows = nil
		for _, s := range splitList(v) {
			w, err := aggregator.ParseWindow(s)
			if err != nil {
				return c, fmt.Errorf("%s: %w", envWindows, err)
			}
			c.opts.Windows = append(c.opts.Windows, w)
		}
	}
	for _, w := range []aggregator.Window{aggregator.Hourly, aggregator.Daily, aggregator.Monthly} {
		name := envRetentionPrefix + strings.ToUpper(w.String())
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		d, err := parseDuration(v)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s: %q is not a duration such as 744h or 31d (0: never expire)", name, v)
		}
		if c.opts.Retention == nil {
			c.opts.Retention = make(map[aggregator.Window]time.Duration)
		}
		c.opts.Retention[w] = d // 0: never expire
	}

	if v := strings.TrimSpace(getenv(envHotPercent)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return c, fmt.Errorf("%s: %q must be a percentage from 0 (off) to 100", envHotPercent, v)
		}
		c.opts.HotPercent = n
		if n == 0 {
			c.opts.HotPercent = -1 // off
		}
	}
	if v := strings.TrimSpace(getenv(envMaxShards)); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return c, fmt.Errorf("%s: %q must be a positive integer", envMaxShards, v)
		}
		c.opts.MaxShards = n
	}
	if v := strings.TrimSpace(getenv(envShardCooldown)); v != "" {
		d, err := parseDuration(v)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s: %q is not a duration such as 5s (0: none)", envShardCooldown, v)
		}
		c.opts.ShardCooldown = d
		if d == 0 {
			c.opts.ShardCooldown = -1 // none
		}
	}
	if v := strings.TrimSpace(getenv(envReportMalformed)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("%s: %q must be true or false", envReportMalformed, v)
		}
		c.opts.ReportMalformed = b
	}
	if v := strings.TrimSpace(getenv(envLogLevel)); v != "" {
		if err := c.logLevel.UnmarshalText([]byte(v)); err != nil {
			return c, fmt.Errorf("%s: %q must be debug, info, warn or error", envLogLevel, v)
		}
	}
	return c, nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseDuration accepts Go durations ("744h", "90m") and whole days
// ("31d").
func parseDuration(v string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 || n > 100_000 {
			return 0, fmt.Errorf("bad number of days %q", d)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}
