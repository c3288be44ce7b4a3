package sim

import (
	"context"
	"os"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// BenchmarkSimulatedAcquires measures simulated acquires per wall-clock
// second end to end (the real limiter on memsim, every acquire with its
// adjusts and rollbacks, store latency, the checkers), on the steady
// scenario. Run it on one core:
//
//	go test -run '^$' -bench SimulatedAcquires -cpu 1 ./sim
func BenchmarkSimulatedAcquires(b *testing.B) {
	// As cmd/simulate runs (unless GOGC is set): the simulation allocates
	// briskly and keeps little.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	for _, bc := range []struct {
		name   string
		cfg    Config
		checks bool
	}{
		{"steady/checks", Config{Scenario: "steady"}, true},
		{"steady/nochecks", Config{Scenario: "steady"}, false},
		{"hot-entity/checks", Config{Scenario: "hot-entity", Rate: 2000}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var acquires uint64
			start, cpu0 := time.Now(), processCPU()
			for i := 0; i < b.N; i++ {
				cfg := bc.cfg
				cfg.Seed, cfg.Duration, cfg.Tail, cfg.NoChecks = uint64(i+1), 10*time.Second, -1, !bc.checks
				rep, err := Run(cfg)
				if err != nil {
					b.Fatal(err)
				}
				acquires += rep.Acquires
			}
			el, cpu := time.Since(start), processCPU()-cpu0
			b.ReportMetric(float64(acquires)/el.Seconds(), "acquires/s")
			b.ReportMetric(float64(acquires)/cpu.Seconds(), "acquires/cpu-s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(acquires), "cpu-ns/acquire")
		})
	}
}

// processCPU returns the CPU time this process has used (user + system):
// on a shared machine, wall time measures the neighbours too.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stubStore answers every request at once, so that BenchmarkScheduler
// measures the simulator alone.
type stubStore struct{}

func (stubStore) Get(context.Context, store.GetInput) (store.GetOutput, error) {
	return store.GetOutput{}, nil
}
func (stubStore) BatchGet(context.Context, store.BatchGetInput) (store.BatchGetOutput, error) {
	return store.BatchGetOutput{}, nil
}
func (stubStore) Put(context.Context, store.PutInput) (store.WriteOutput, error) {
	return store.WriteOutput{}, nil
}
func (stubStore) Update(context.Context, store.UpdateInput) (store.WriteOutput, error) {
	return store.WriteOutput{}, nil
}
func (stubStore) Delete(context.Context, store.DeleteInput) (store.WriteOutput, error) {
	return store.WriteOutput{}, nil
}
func (stubStore) TransactWrite(context.Context, store.TransactWriteInput) (store.TransactWriteOutput, error) {
	return store.TransactWriteOutput{}, nil
}
func (stubStore) Query(context.Context, store.QueryInput) (store.QueryOutput, error) {
	return store.QueryOutput{}, nil
}
func (stubStore) WriteConcurrently(context.Context, []store.Write) []store.WriteResult { return nil }
func (stubStore) StreamLen() uint64                                                    { return 0 }
func (stubStore) Stream(uint64) []memsim.Record                                        { return nil }
func (stubStore) AppendStream(b []memsim.Record, _ uint64) []memsim.Record             { return b }
func (stubStore) TrimStream(uint64)                                                    {}
func (stubStore) Items() []store.Item                                                  { return nil }
func (stubStore) Totals() memsim.Totals                                                { return memsim.Totals{} }

// BenchmarkScheduler measures the simulator's own machinery: 256 client
// coroutines, each making one store call per simulated acquire (a
// scheduling point with drawn request and response latency: three events
// and two coroutine switches) against a store that answers at once, and
// a think time between calls. It is the ceiling the simulator puts on
// simulated acquires per second, whatever the limiter and store cost.
//
//	go test -run '^$' -bench Scheduler -cpu 1 ./sim
func BenchmarkScheduler(b *testing.B) {
	var calls uint64
	start, cpu0 := time.Now(), processCPU()
	for i := 0; i < b.N; i++ {
		s, err := New(Config{Scenario: "steady", Seed: uint64(i + 1), Writers: 256, Duration: 10 * time.Second, Tail: -1, NoChecks: true})
		if err != nil {
			b.Fatal(err)
		}
		s.st = stubStore{}
		in := store.UpdateInput{Key: store.Key{PK: "ns/BUCKET#e#r#0", SK: "#STATE"}}
		for _, c := range s.clients {
			c.stop()
			c.start(func() {
				h := handle{c}
				for {
					if !c.sleepUntil(s.now+int64(c.rng.ExpFloat64()*float64(20*time.Millisecond))) || s.stopping {
						return
					}
					if _, err := h.Update(bgctx, in); err != nil {
						return
					}
					calls++
				}
			})
		}
		s.Run()
	}
	el, cpu := time.Since(start), processCPU()-cpu0
	b.ReportMetric(float64(calls)/el.Seconds(), "calls/s")
	b.ReportMetric(float64(calls)/cpu.Seconds(), "calls/cpu-s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(calls), "cpu-ns/call")
}

func (stubStore) Partition(string) memsim.PartitionStats  { return memsim.PartitionStats{} }
func (stubStore) PartitionConsumed(string) store.Capacity { return store.Capacity{} }
func (stubStore) PartitionThrottles(string) uint64        { return 0 }
