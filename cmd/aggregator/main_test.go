package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shardlimit/limiter/aggregator"
	"github.com/shardlimit/limiter/store/memsim"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(env(map[string]string{envTable: "rate-limits"}))
	if err != nil {
		t.Fatal(err)
	}
	want := config{table: "rate-limits", opts: aggregator.Options{Windows: aggregator.DefaultWindows}, logLevel: slog.LevelInfo}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config %+v, want %+v", c, want)
	}
	if _, err := aggregator.New(memsim.New(), c.opts); err != nil {
		t.Error(err)
	}
}

func TestLoadConfigEverything(t *testing.T) {
	c, err := loadConfig(env(map[string]string{
		envTable:                       " rate-limits ",
		envNamespaces:                  "tenant-a, tenant-b,",
		envWindows:                     "hourly,MONTH",
		envRetentionPrefix + "HOURLY":  "48h",
		envRetentionPrefix + "MONTHLY": "0",
		envRetentionPrefix + "DAILY":   "90d",
		envHotPercent:                  "0",
		envMaxShards:                   "64",
		envShardCooldown:               "0",
		envReportMalformed:             "true",
		envLogLevel:                    "debug",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := config{table: "rate-limits", logLevel: slog.LevelDebug, opts: aggregator.Options{
		Namespaces: []string{"tenant-a", "tenant-b"},
		Windows:    []aggregator.Window{aggregator.Hourly, aggregator.Monthly},
		Retention: map[aggregator.Window]time.Duration{aggregator.Hourly: 48 * time.Hour, aggregator.Daily: 90 * 24 * time.Hour,
			aggregator.Monthly: 0},
		HotPercent: -1, MaxShards: 64, ShardCooldown: -1, ReportMalformed: true,
	}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config\n got %+v\nwant %+v", c, want)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	for name, v := range map[string]string{
		envWindows:                   "hourly,weekly",
		envRetentionPrefix + "DAILY": "forever",
		envHotPercent:                "120",
		envMaxShards:                 "0",
		envShardCooldown:             "-5s",
		envReportMalformed:           "maybe",
		envLogLevel:                  "loud",
	} {
		_, err := loadConfig(env(map[string]string{envTable: "t", name: v}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: err %v, want one naming the variable", name, v, err)
		}
	}
	if _, err := loadConfig(env(nil)); err == nil || !strings.Contains(err.Error(), envTable) {
		t.Errorf("no table: %v", err)
	}
}

// The Lambda handler over a real event, on memsim.
func TestHandler(t *testing.T) {
	b, err := os.ReadFile("../../aggregator/testdata/acquire-adjust-rollback.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	st := memsim.New()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := aggregator.New(st, aggregator.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := handler(p, log)(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("%+v, %v", resp, err)
	}
	if st.Len() != 3 { // hours 05 and 06, day 2026-01-01
		t.Errorf("%d snapshot items", st.Len())
	}
	out, _ := json.Marshal(resp)
	if string(out) != `{"batchItemFailures":null}` && string(out) != `{"batchItemFailures":[]}` {
		t.Errorf("response %s", out)
	}
}
