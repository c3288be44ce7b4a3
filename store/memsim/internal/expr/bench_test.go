package expr

import (
	"runtime"
	"syscall"
	"testing"
)

// cpuTimer reports, beside wall time, the CPU time of the benchmark's own
// thread per operation ("cpu-ns/op"): on a shared machine wall time
// includes time other processes hold the core.
type cpuTimer struct{ start int64 }

func threadCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func startCPU(b *testing.B) *cpuTimer {
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
	return &cpuTimer{start: threadCPU()}
}

func (c *cpuTimer) report(b *testing.B) {
	b.ReportMetric(float64(threadCPU()-c.start)/float64(b.N), "cpu-ns/op")
}

// The limiter's typical request (typicalExpr: ten ADDs, a SET, a condition
// of five tests) against a 19-attribute item. Parse is cached by memsim; the
// per-request cost is Bind + Check + Apply.

func BenchmarkBindCheckApply(b *testing.B) {
	e, old := typicalExpr(b), typicalItem()
	p, err := Parse(e.Update, e.Condition)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	ct := startCPU(b)
	for b.Loop() {
		bd, err := p.Bind(e.Names, e.Values, isKey)
		if err != nil {
			b.Fatal(err)
		}
		if ok := bd.Check(old); !ok {
			b.Fatal("condition false")
		}
		if _, _, err := bd.Apply(old, testKey); err != nil {
			b.Fatal(err)
		}
	}
	ct.report(b)
}

func BenchmarkBind(b *testing.B) {
	e := typicalExpr(b)
	p, _ := Parse(e.Update, e.Condition)
	b.ReportAllocs()
	ct := startCPU(b)
	for b.Loop() {
		if _, err := p.Bind(e.Names, e.Values, isKey); err != nil {
			b.Fatal(err)
		}
	}
	ct.report(b)
}

func BenchmarkCheck(b *testing.B) {
	e, old := typicalExpr(b), typicalItem()
	p, _ := Parse(e.Update, e.Condition)
	bd, _ := p.Bind(e.Names, e.Values, isKey)
	b.ReportAllocs()
	ct := startCPU(b)
	for b.Loop() {
		if ok := bd.Check(old); !ok {
			b.Fatal("condition false")
		}
	}
	ct.report(b)
}

func BenchmarkApply(b *testing.B) {
	e, old := typicalExpr(b), typicalItem()
	p, _ := Parse(e.Update, e.Condition)
	bd, _ := p.Bind(e.Names, e.Values, isKey)
	b.ReportAllocs()
	ct := startCPU(b)
	for b.Loop() {
		if _, _, err := bd.Apply(old, testKey); err != nil {
			b.Fatal(err)
		}
	}
	ct.report(b)
}

func BenchmarkParse(b *testing.B) {
	e := typicalExpr(b)
	b.ReportAllocs()
	ct := startCPU(b)
	for b.Loop() {
		if _, err := Parse(e.Update, e.Condition); err != nil {
			b.Fatal(err)
		}
	}
	ct.report(b)
}
