package sim

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/shardlimit/limiter"
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
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
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
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(acquires), "B/acquire")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(acquires), "allocs/acquire")
			b.ReportMetric(float64(acquires)/el.Seconds(), "acquires/s")
			b.ReportMetric(float64(acquires)/cpu.Seconds(), "acquires/cpu-s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(acquires), "cpu-ns/acquire")
		})
	}
}

// BenchmarkAcquireAlone is the floor under BenchmarkSimulatedAcquires:
// the limiter's cheapest acquire, admitted by one speculative write (the
// path of 97 % of hot-entity's acquires), the same entity, limit and
// amount every time, on memsim configured as the simulator configures it
// (shared results), made in a plain loop: no scheduler, no
// latency, no checkers, no stream, no partition ceiling. acquire+adjust
// adds an Adjust of one token to every lease (steady's acquires have 0.8
// adjusts each). A simulated acquire cannot cost less than this; the ratio
// of the two is what the simulator (and the contention it simulates)
// adds, and it depends far less than either time on how fast the machine
// is. full is the acquire of a lone writer far below its limit: the
// bucket is full again at every acquire, and each is one full write.
//
//	go test -run '^$' -bench 'SimulatedAcquires/hot-entity/checks|AcquireAlone' -cpu 1 ./sim
func BenchmarkAcquireAlone(b *testing.B) {
	// A bucket that never fills again (one token an hour against one
	// taken per acquire): a full bucket would be reset by the full write,
	// which a lone writer rightly prefers.
	slow := limiter.Limit{Name: "rps", Capacity: limiter.MaxTokens / 2, Refill: 1, Period: time.Hour}
	for _, bc := range []struct {
		name   string
		limit  limiter.Limit
		adjust bool
		path   limiter.Path
	}{
		{"acquire", slow, false, limiter.PathSpeculative},
		{"acquire+adjust", slow, true, limiter.PathSpeculative},
		{"full", limiter.PerSecond("rps", 1_000_000), false, limiter.PathFull},
	} {
		b.Run(bc.name, func(b *testing.B) { benchAcquireAlone(b, bc.limit, bc.adjust, bc.path) })
	}
}

func benchAcquireAlone(b *testing.B, limit limiter.Limit, adjust bool, path limiter.Path) {
	clk := memsim.NewManualClock(memsim.Epoch())
	st := memsim.New(memsim.WithClock(clk), memsim.WithStream(false), memsim.WithPartitionLimits(0, 0),
		memsim.WithSharedResults(true))
	onPath := 0
	l, err := limiter.New(st, limiter.WithClock(clk), limiter.WithNamespace("bench"), limiter.WithLogger(discard),
		limiter.WithObserver(limiter.ObserverFunc(func(e limiter.Event) {
			if e.Op == "acquire" && e.Path == path {
				onPath++
			}
		})))
	if err != nil {
		b.Fatal(err)
	}
	req := limiter.Request{Entity: "hot-tenant", Resource: "gpt-4o", Limits: []limiter.Limit{limit}, Consume: map[string]int64{"rps": 1}}
	more := map[string]int64{"rps": 1}
	ctx := context.Background()
	acquire := func() {
		clk.Add(2 * time.Millisecond) // 500 writes a second: under the hidden wcu limit
		lease, err := l.Acquire(ctx, req)
		if err == nil && adjust {
			err = lease.Adjust(ctx, more)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		acquire()
	}
	onPath = 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for range b.N {
		acquire()
	}
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/acquire")
	b.StopTimer()
	if onPath*100 < b.N*99 {
		b.Fatalf("%d of %d acquires took the %v path, want 99%%", onPath, b.N, path)
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
func (stubStore) TransactWrite(context.Context, store.TransactWriteInput) (store.WriteOutput, error) {
	return store.WriteOutput{}, nil
}
func (stubStore) Query(context.Context, store.QueryInput) (store.QueryOutput, error) {
	return store.QueryOutput{}, nil
}
func (stubStore) Scan(context.Context, store.ScanInput) (store.ScanOutput, error) {
	return store.ScanOutput{}, nil
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
