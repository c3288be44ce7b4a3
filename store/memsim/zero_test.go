package memsim_test

import (
	"context"
	"math"
	"testing"

	"github.com/shardlimit/limiter/internal/zerotest"
	"time"

	"github.com/shardlimit/limiter/store"
	"github.com/shardlimit/limiter/store/memsim"
)

// zcall is a zerotest.Call, in tables without field names.
type zcall struct {
	Name string
	Fn   func() error
	Want string
}

// The store's methods on a nil or zero Store, with a nil context and zero
// inputs, its options and injectors with nil and nonsense arguments, and
// the size functions with out-of-range numbers: an error where the call
// returns one, never a panic (New's documented panics on out-of-range
// options are TestBadOptionsPanic's).
func TestStoryNilAndZeroInputsNeverPanic(t *testing.T) {
	ctx := context.Background()
	var nilCtx context.Context
	var nilStore *memsim.Store
	var zeroStore memsim.Store
	var nilClock *memsim.ManualClock
	var zeroClock memsim.ManualClock
	st := memsim.New()
	k := store.Key{PK: "p", SK: "s"}
	get := func(s *memsim.Store) error { _, err := s.Get(ctx, store.GetInput{Key: k}); return err }
	calls := []zcall{}
	for _, c := range []struct {
		what string
		s    *memsim.Store
		ctx  context.Context
		want string
	}{{"nil Store", nilStore, ctx, "Store is nil or zero"}, {"zero Store", &zeroStore, ctx, "Store is nil or zero"}, {"nil ctx", st, nilCtx, "ctx is nil"}} {
		s, ctx, want := c.s, c.ctx, c.want
		calls = append(calls,
			zcall{c.what + " Get", func() error { _, err := s.Get(ctx, store.GetInput{Key: k}); return err }, want},
			zcall{c.what + " BatchGet", func() error { _, err := s.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{k}}); return err }, want},
			zcall{c.what + " Put", func() error {
				_, err := s.Put(ctx, store.PutInput{Item: store.Item{"PK": store.Str("p"), "SK": store.Str("s")}})
				return err
			}, want},
			zcall{c.what + " Update", func() error { _, err := s.Update(ctx, store.UpdateInput{Key: k}); return err }, want},
			zcall{c.what + " Delete", func() error { _, err := s.Delete(ctx, store.DeleteInput{Key: k}); return err }, want},
			zcall{c.what + " Query", func() error { _, err := s.Query(ctx, store.QueryInput{PartitionKey: "p"}); return err }, want},
			zcall{c.what + " Scan", func() error { _, err := s.Scan(ctx, store.ScanInput{}); return err }, want},
			zcall{c.what + " TransactWrite", func() error {
				_, err := s.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{Delete: &store.DeleteInput{Key: k}}}})
				return err
			}, want},
			zcall{c.what + " WriteConcurrently", func() error {
				return s.WriteConcurrently(ctx, []store.Write{{Delete: &store.DeleteInput{Key: k}}})[0].Err
			}, want},
		)
	}
	for _, s := range []*memsim.Store{nilStore, &zeroStore} {
		calls = append(calls, zcall{"nil or zero Store reads", func() error {
			s.AppendStream(nil, 0)
			s.Clock()
			s.IndexPartition("", "")
			s.Items()
			s.Len()
			s.Partition("")
			s.PartitionConsumed("")
			s.PartitionThrottles("")
			s.Partitions()
			s.Peek(store.Key{})
			s.Stream(0)
			s.StreamLen()
			s.Totals()
			s.TrimStream(math.MaxUint64)
			return nil
		}, ""})
	}
	calls = append(calls, []zcall{
		{"Get zero Key", func() error { _, err := st.Get(ctx, store.GetInput{}); return err }, "key"},
		{"Put nil Item", func() error { _, err := st.Put(ctx, store.PutInput{}); return err }, ""},
		{"Update zero", func() error { _, err := st.Update(ctx, store.UpdateInput{}); return err }, ""},
		{"Delete zero", func() error { _, err := st.Delete(ctx, store.DeleteInput{}); return err }, ""},
		{"BatchGet nil", func() error { _, err := st.BatchGet(ctx, store.BatchGetInput{}); return err }, ""},
		{"BatchGet zero Key", func() error { _, err := st.BatchGet(ctx, store.BatchGetInput{Keys: []store.Key{{}}}); return err }, ""},
		{"Query zero", func() error { _, err := st.Query(ctx, store.QueryInput{}); return err }, ""},
		{"Query Limit -1", func() error { _, err := st.Query(ctx, store.QueryInput{PartitionKey: "p", Limit: -1}); return err }, "imit"},
		{"Scan Limit -1", func() error { _, err := st.Scan(ctx, store.ScanInput{Limit: -1}); return err }, "imit"},
		{"Scan zero Start", func() error { _, err := st.Scan(ctx, store.ScanInput{Start: &store.Key{}}); return err }, ""},
		{"TransactWrite nil", func() error { _, err := st.TransactWrite(ctx, store.TransactWriteInput{}); return err }, ""},
		{"TransactWrite empty Write", func() error {
			_, err := st.TransactWrite(ctx, store.TransactWriteInput{Actions: []store.Write{{}}})
			return err
		}, ""},
		{"WriteConcurrently nil and empty", func() error {
			st.WriteConcurrently(ctx, nil)
			st.WriteConcurrently(ctx, []store.Write{{}, {Put: &store.PutInput{}, Delete: &store.DeleteInput{}}, {Check: &store.CheckInput{}}})
			return nil
		}, ""},
		{"stream reads", func() error {
			st.AppendStream(nil, math.MaxUint64)
			st.Stream(math.MaxUint64)
			st.TrimStream(math.MaxUint64)
			st.Partition("")
			st.IndexPartition("", "")
			st.Peek(store.Key{})
			return nil
		}, ""},

		{"New nil option", func() error { return get(memsim.New(nil)) }, "ok"},
		{"WithClock(nil)", func() error { return get(memsim.New(memsim.WithClock(nil))) }, ""},
		{"WithFaults(nil)", func() error { return get(memsim.New(memsim.WithFaults(nil))) }, "ok"},
		{"WithHook(nil)", func() error { return get(memsim.New(memsim.WithHook(nil))) }, "ok"},
		{"WithSleeper(nil)", func() error {
			return get(memsim.New(memsim.WithSleeper(nil), memsim.WithFaults(memsim.Latency(time.Millisecond))))
		}, ""},

		{"injectors with nil and nonsense", func() error {
			for _, inj := range []memsim.Injector{
				memsim.Always(255), memsim.Chain(), memsim.Chain(nil), memsim.During(time.Time{}, time.Time{}, nil),
				memsim.During(time.Now(), time.Time{}, memsim.Always(memsim.FaultThrottle)),
				memsim.Func("", nil), memsim.Latency(-1), memsim.Latency(math.MaxInt64), memsim.Nth(0, memsim.FaultThrottle),
				memsim.OnKey("", nil), memsim.OnOps(nil, nil), memsim.OnOps([]memsim.OpKind{255}, memsim.Always(memsim.FaultThrottle)),
				memsim.Probability(math.NaN(), 0, memsim.FaultThrottle), memsim.Probability(-1, 0, 255), memsim.Probability(math.Inf(1), 0, memsim.FaultThrottle),
				memsim.ThrottleStorm(time.Time{}, 0, -1, math.NaN(), 0), memsim.ThrottleStorm(time.Time{}, -1, math.MaxInt64, 2, 0),
			} {
				_ = inj.String()
				inj.Inject(memsim.Op{})
				s := memsim.New(memsim.WithFaults(inj), memsim.WithSleeper(func(context.Context, time.Duration) error { return nil }))
				_ = get(s)
			}
			return nil
		}, ""},

		{"nil ManualClock", func() error {
			nilClock.Now()
			nilClock.Add(time.Second)
			nilClock.Set(time.Time{})
			return nilClock.Sleep(ctx, time.Second)
		}, ""},
		{"zero ManualClock", func() error {
			zeroClock.Now()
			zeroClock.Add(-time.Hour)
			zeroClock.Add(math.MaxInt64)
			zeroClock.Set(time.Time{})
			return zeroClock.Sleep(ctx, -1)
		}, ""},
		{"ManualClock.Sleep nil ctx", func() error { return memsim.NewManualClock(time.Time{}).Sleep(nilCtx, time.Second) }, "ctx"},

		{"sizes", func() error {
			memsim.ItemSize(nil)
			memsim.ItemSize(store.Item{"": store.Value{}})
			memsim.ValueSize(store.Value{})
			memsim.NumberSize(math.MinInt64)
			memsim.NumberSize(math.MaxInt64)
			memsim.ReadUnits(-1, true)
			memsim.ReadUnits(math.MaxInt, false)
			memsim.WriteUnits(-1)
			memsim.WriteUnits(math.MaxInt)
			return nil
		}, ""},
		{"names", func() error {
			_ = memsim.Fault(255).String()
			_ = memsim.OpKind(255).String()
			memsim.OpKind(255).IsWrite()
			memsim.Decision{}.IsNone()
			return nil
		}, ""},
	}...)
	zerotest.Run(t, calls)
}
