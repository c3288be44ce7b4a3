package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shardlimit/limiter/dynamotest"
)

// TestMain shares one DynamoDB Local among the tests that need one.
func TestMain(m *testing.M) { dynamotest.Main(m) }

// runJSON runs the tool with -json and decodes its report.
func runJSON(t *testing.T, args ...string) (*report, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(append(args, "-json"), &out, &errOut); code != 0 {
		t.Fatalf("exit status %d\nstderr: %s\nstdout: %s", code, errOut.String(), out.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decode the report: %v\n%s", err, out.String())
	}
	return &rep, errOut.String()
}

// checkCounts checks what holds in every report: the outcomes add up, the
// paths add up to the attempts, and the store requests were counted.
func checkCounts(t *testing.T, rep *report) {
	t.Helper()
	if rep.Attempts == 0 {
		t.Fatal("no attempts")
	}
	if got := rep.Admitted + rep.Refused + rep.Unavailable + rep.Errors; got != rep.Attempts {
		t.Errorf("admitted %d + refused %d + unavailable %d + errors %d = %d, want the %d attempts",
			rep.Admitted, rep.Refused, rep.Unavailable, rep.Errors, got, rep.Attempts)
	}
	var acq, adm, ref int64
	for _, p := range rep.Paths {
		acq += p.Acquires
		adm += p.Admitted
		ref += p.Refused
	}
	if acq != rep.Attempts || adm != rep.Admitted || ref != rep.Refused {
		t.Errorf("paths add up to %d acquires, %d admitted, %d refused; the run had %d, %d, %d",
			acq, adm, ref, rep.Attempts, rep.Admitted, rep.Refused)
	}
	if len(rep.Ops) == 0 || rep.CallsPerAttempt <= 0 {
		t.Errorf("no store requests counted: ops %+v, calls per attempt %v", rep.Ops, rep.CallsPerAttempt)
	}
	if rep.FalseRefusals > rep.Refused {
		t.Errorf("%d false refusals of %d refusals", rep.FalseRefusals, rep.Refused)
	}
	if float64(rep.Admitted) > rep.AdmissionBound+0.5 {
		t.Errorf("admitted %d above the admission bound %.1f", rep.Admitted, rep.AdmissionBound)
	}
}

func TestOneHotBucketWithRawFloor(t *testing.T) {
	rep, _ := runJSON(t, "-writers", "4", "-duration", "600ms", "-slice", "200ms", "-rate", "400")
	checkCounts(t, rep)
	if rep.Store != storeMemsim || !rep.FailedWritesBilled || rep.Stream {
		t.Errorf("store %q, failed writes billed %v, stream %v", rep.Store, rep.FailedWritesBilled, rep.Stream)
	}
	if rep.Slices != 3 {
		t.Errorf("%d slices, want 3 (600ms in slices of 200ms)", rep.Slices)
	}
	// Far below its limit, every acquire is admitted.
	if rep.Refused != 0 || rep.Unavailable != 0 || rep.Admitted != rep.Attempts {
		t.Errorf("admitted %d of %d, refused %d, unavailable %d", rep.Admitted, rep.Attempts, rep.Refused, rep.Unavailable)
	}
	if rep.Raw == nil || rep.Raw.Writes == 0 || rep.RawRatio <= 0 {
		t.Fatalf("raw floor %+v, ratio %v", rep.Raw, rep.RawRatio)
	}
	if h := rep.HotPartition; h == nil || !strings.Contains(h.PK, "/BUCKET#e0#default#0") || h.WCU <= 0 {
		t.Errorf("hot partition %+v", h)
	}
	if rep.MaxShards != 1 || rep.ShardDoublings != 0 {
		t.Errorf("shards %d, doublings %d", rep.MaxShards, rep.ShardDoublings)
	}
	// The hot path: admitted by one write, one call and one WCU each.
	h := rep.HotPath
	if h.Acquires == 0 || h.Admitted != h.Acquires || h.RoundTrips != h.Acquires || h.WCU != float64(h.Acquires) || h.RCU != 0 {
		t.Errorf("hot path %+v", h)
	}
}

func TestOfferedAboveTheLimit(t *testing.T) {
	// 100 offered per second on 5 per half second (10 per second, a burst
	// of 5): most are refused, and what is admitted stays within burst +
	// rate x time.
	rep, _ := runJSON(t, "-writers", "8", "-processes", "8", "-limits", "rps:5/500ms", "-rate", "100",
		"-duration", "500ms", "-raw=false")
	checkCounts(t, rep)
	if rep.Refused == 0 || rep.Admitted == 0 {
		t.Errorf("admitted %d, refused %d: want both", rep.Admitted, rep.Refused)
	}
	if rep.Raw != nil || rep.RawRatio != 0 {
		t.Errorf("-raw=false measured a raw floor: %+v", rep.Raw)
	}
	if rep.RefusedBy["rps"] == 0 {
		t.Errorf("refusals by limit %v, want rps", rep.RefusedBy)
	}
}

func TestCascadeOverKeys(t *testing.T) {
	rep, _ := runJSON(t, "-writers", "4", "-processes", "2", "-keys", "3", "-cascade", "-parent-limits", "rps:1000/s",
		"-limits", "rps:500/s", "-rate", "200", "-duration", "400ms", "-raw=false")
	checkCounts(t, rep)
	if !rep.Cascade || rep.ParentLimits != "rps:1000/s" || rep.Keys != 3 {
		t.Errorf("cascade %v, parent limits %q, keys %d", rep.Cascade, rep.ParentLimits, rep.Keys)
	}
	// Each admitted acquire writes the entity's bucket and the parent's.
	if rep.WCUPerAdmitted < 2 {
		t.Errorf("%.3f WCU per admitted acquire with cascade, want at least 2", rep.WCUPerAdmitted)
	}
}

func TestServerLatency(t *testing.T) {
	rep, _ := runJSON(t, "-writers", "4", "-latency", "4ms", "-duration", "300ms", "-slice", "150ms")
	checkCounts(t, rep)
	if rep.ServerLatencyMs != 4 {
		t.Errorf("server latency %v ms", rep.ServerLatencyMs)
	}
	// Every call waits the round trip: no Acquire or raw write is faster.
	if rep.P50Ms < 4 || rep.Raw.P50Ms < 4 {
		t.Errorf("p50 %.2f ms, raw p50 %.2f ms, with 4 ms of server latency", rep.P50Ms, rep.Raw.P50Ms)
	}
}

func TestTextReportAndProgress(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-writers", "2", "-rate", "100", "-duration", "400ms", "-slice", "200ms", "-progress", "150ms"}, &out, &errOut); code != 0 {
		t.Fatalf("exit status %d: %s", code, errOut.String())
	}
	for _, want := range []string{"store      memsim", "acquires   ", "calls      ", "capacity   ", "hot path   ", "the averages above also count the other paths below", "bound      ", "refusals   ",
		"latency    p50", "shards     0 doublings", "partition  hottest", "raw floor  ", "limiter/raw throughput", "interleaved in 2 slices",
		"create", "request", "Update"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "loadtest: ") || !strings.Contains(errOut.String(), "raw writes") {
		t.Errorf("no progress line on stderr: %q", errOut.String())
	}
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-store", "redis"}, "-store"},
		{[]string{"-writers", "0"}, "-writers"},
		{[]string{"-writers", "4", "-processes", "5"}, "-processes"},
		{[]string{"-rate", "-1"}, "-rate"},
		{[]string{"-limits", "rps"}, "-limits"},
		{[]string{"-limits", "rps:0/s"}, "-limits"},
		{[]string{"-limits", "rps:10/fortnight"}, "period"},
		{[]string{"-limits", "rps:10/s,rps:20/s"}, "given twice"},
		{[]string{"-consume", "tpm:1"}, "-consume"},
		{[]string{"-parent-limits", "rps:1/s"}, "-cascade"},
		{[]string{"-latency", "30ms", "-store", "dynamodb-local"}, "-latency"},
		{[]string{"-store", "dynamodb"}, "-table"},
		{[]string{"-table", "x"}, "-table"},
		{[]string{"-duration", "0s"}, "-duration"},
		{[]string{"-raw-item", "huge"}, "-raw-item"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit status %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: error %q does not name %q", tc.args, errOut.String(), tc.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "-writers") {
		t.Errorf("-h: exit status %d, usage %q", code, errOut.String())
	}
}

// TestDynamoDBLocal runs a short load on DynamoDB Local: a fresh table
// without a stream, deleted at the end.
func TestDynamoDBLocal(t *testing.T) {
	srv := dynamotest.Start(t)
	rep, _ := runJSON(t, "-store", "dynamodb-local", "-endpoint", srv.Endpoint, "-writers", "4", "-processes", "2",
		"-rate", "100", "-duration", "1s", "-slice", "500ms")
	checkCounts(t, rep)
	if rep.Store != storeDynamoDBLocal || rep.Stream || rep.FailedWritesBilled {
		t.Errorf("store %q, stream %v, failed writes billed %v", rep.Store, rep.Stream, rep.FailedWritesBilled)
	}
	if rep.Admitted != rep.Attempts || rep.Raw == nil || rep.Raw.Writes == 0 {
		t.Errorf("admitted %d of %d; raw %+v", rep.Admitted, rep.Attempts, rep.Raw)
	}
	if rep.HotPartition != nil {
		t.Errorf("a partition report from DynamoDB Local: %+v", rep.HotPartition)
	}
	tables, err := srv.Client.ListTables(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range tables.TableNames {
		if strings.HasPrefix(name, "loadtest-") {
			t.Errorf("table %s left behind", name)
		}
	}
}

// With -reservations, the busy processes admit most acquires from their
// pools: the pool path carries them, with no store call.
func TestReservations(t *testing.T) {
	rep, _ := runJSON(t, "-reservations", "-writers", "8", "-processes", "2", "-rate", "4000", "-duration", "500ms", "-raw=false")
	checkCounts(t, rep)
	var pooled int64
	for _, p := range rep.Paths {
		if p.Path == "pool" {
			pooled = p.Admitted
		}
	}
	if pooled*2 < rep.Admitted {
		t.Fatalf("%d of %d admitted from pools, want most", pooled, rep.Admitted)
	}
}

// A slot that no writer is free to take is dropped, not sent late in a
// burst: with no writer taking any, every slot of the slice is dropped and
// counted.
func TestPaceDropsSlotsNoWriterTakes(t *testing.T) {
	r := &loadRun{o: &options{rate: 1000}}
	p, stop := r.newPace(context.Background(), 30*time.Millisecond, true)
	<-p.done
	stop()
	if got := r.dropped.Load(); got != 30 {
		t.Errorf("dropped %d slots, want the slice's 30", got)
	}
	if p.wait(context.Background()) {
		t.Error("a slot handed out after the slice")
	}
}

// -raw-item bucket: the raw floor ADDs to a bucket item the limiter made
// (one acquire on an entity of its own), and the report says so.
func TestRawFloorOnABucketItem(t *testing.T) {
	rep, _ := runJSON(t, "-writers", "2", "-rate", "100", "-duration", "500ms", "-raw-item", "bucket")
	checkCounts(t, rep)
	if rep.Raw == nil || rep.Raw.Item != "bucket" || rep.Raw.Writes == 0 || rep.Raw.Failed != 0 {
		t.Fatalf("raw floor %+v, want writes to the bucket item, none failed", rep.Raw)
	}
}
