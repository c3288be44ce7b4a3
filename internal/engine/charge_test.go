package engine

import (
	"testing"

	"github.com/shardlimit/limiter/internal/keys"
	"github.com/shardlimit/limiter/store"
)

// The Charge machine, path by path: what the client knows (its memory: the
// last image of a shard, when it came, its estimates of the other
// writers), the request (one token of 10 a second unless a case says
// otherwise) and now; then the conversation: each step the machine asks
// for, and the result it is fed. docs/write-paths.md describes each path.
//
// Amounts are millitokens: 1000 is a token, the burst is 10,000, and 10
// refill every ms (a token in 100 ms). Every case runs at T.
func TestChargePaths(t *testing.T) {
	ref := bucketRef
	p := plan1(ref)
	// tight allows 1 token a second: its burst cannot be split in two.
	tight := NewPlan(ref, []Limit{perSecond("rps", 1)}, map[string]int64{"rps": 1})
	// busy admits up to 1,000 acquires a second: enough to heat a
	// partition, so its bucket may double (p's 10 a second never does).
	busy := planBusy(ref)
	rps := func(tk int64) map[string]int64 { return map[string]int64{"rps": tk} }
	hot := func(tk int64) map[string]int64 { return map[string]int64{"rps": tk, "wcu": 0} }
	// holds: the client's last image of shard 0, of a bucket of one shard,
	// is s, received at at.
	holds := func(s shape, at int64) func(*testing.T, *Memory) {
		return func(t *testing.T, m *Memory) { knows(t, m, ref, s.item(p), 1, at) }
	}
	sharded := func(n int64) func(*testing.T, *Memory) {
		return func(_ *testing.T, m *Memory) { m.learn(ref, 0, nil, n, T-1000, 0, nil); vouch(m, ref, T-1000) }
	}

	cases := []struct {
		name  string
		plan  *Plan                         // nil: p
		knows func(t *testing.T, m *Memory) // nil: nothing
		rnd   Rand                          // nil: picks() (the first shard not tried)
		opts  Options
		turns []exchange
		check func(t *testing.T, c *Charge, last Step, m *Memory)
	}{{
		name: "speculative: nothing known, the consumption-only ADD",
		turns: []exchange{
			{"update 0 speculative", wrote(shape{rf: T - 3000, tk: rps(9000)}.item(p))},
			{"done speculative", Result{}},
		},
		check: func(t *testing.T, c *Charge, _ Step, m *Memory) {
			if c.Shard != 0 || c.N != 1 || m.View(ref, 0).Img == nil {
				t.Fatalf("charged shard %d of %d, image remembered %v", c.Shard, c.N, m.View(ref, 0).Img != nil)
			}
		},
	}, {
		name:  "speculative: the image has the tokens and is below its burst (fl > now)",
		knows: holds(shape{rf: T - 10, tk: rps(8000)}, T-10),
		turns: []exchange{
			{"update 0 speculative", wrote(shape{rf: T - 10, tk: rps(7000)}.item(p))},
			{"done speculative", Result{}},
		},
	}, {
		name:  "full: the image is full by now and nobody else writes the bucket",
		knows: holds(shape{rf: T - 5000, tk: rps(5000)}, T-5000),
		turns: []exchange{
			{"update 0 full", wrote(shape{rf: T, tk: rps(9000)}.item(p))},
			{"done full", Result{}},
		},
	}, {
		name: "not full: the same image, but others wrote 40 times since (0.01 a ms for 4 s)",
		knows: func(t *testing.T, m *Memory) {
			knows(t, m, ref, shape{rf: T - 5000, tk: rps(5000)}.item(p), 1, T-4000)
			measured(m, ref, 0, 0.01, 0.01, T-4000, nil)
		},
		turns: []exchange{{"update 0 speculative", Result{}}},
	}, {
		name: "create: no item; the index lists no shard of this bucket (one of another resource)",
		turns: []exchange{
			{"update 0 speculative", gone},
			{"query discover", listed(keys.Bucket{Namespace: "ns", Entity: "e", Resource: "other"}, 1)},
			{"put 0 create", Result{}},
			{"done create", Result{}},
		},
		check: func(t *testing.T, c *Charge, _ Step, _ *Memory) {
			if st, _ := c.Img.comp.Get("rps"); c.N != 1 || c.Img.shardCount != 1 || st.Tokens != 9000 {
				t.Fatalf("created at %d shards (item %d) holding %d, want 1 shard holding the burst less the charge", c.N, c.Img.shardCount, st.Tokens)
			}
		},
	}, {
		name: "create lost to another creator: the item its Put returns is charged consume-only",
		turns: []exchange{
			{"update 0 speculative", gone},
			{"query discover", Result{}},
			{"put 0 create", failed(shape{rf: T, tk: rps(9000)}.item(p))},
			{"update 0 retry", Result{}},
		},
	}, {
		name:  "speculative from the refill: the stored 0.5 token cannot pay, the refill of 200 ms can, fh says so",
		knows: holds(shape{rf: T - 200, tk: rps(500)}, T-200),
		turns: []exchange{
			{"update 0 speculative", wrote(shape{rf: T - 200, tk: rps(-500)}.item(p))},
			{"done speculative", Result{}},
		},
	}, {
		name:  "normal: the stored 0.5 token cannot pay, the refill of 200 ms can, but fh drifted too far to show it",
		knows: holds(shape{rf: T - 200, tk: rps(500), ahead: drifted}, T-200),
		turns: []exchange{
			{"update 0 normal", wrote(shape{rf: T, tk: rps(1500)}.item(p))},
			{"done normal", Result{}},
		},
	}, {
		name:  "retry: the normal write lost the rf race; the item shows 3 stored tokens",
		knows: holds(shape{rf: T - 200, tk: rps(500), ahead: drifted}, T-200),
		turns: []exchange{
			{"update 0 normal", failed(shape{rf: T, tk: rps(3000)}.item(p))},
			{"update 0 retry", wrote(shape{rf: T, tk: rps(2000)}.item(p))},
			{"done retry", Result{}},
		},
	}, {
		name: "retry from the refill after a failed speculative write: the stored tokens cannot pay, the refill can",
		turns: []exchange{
			{"update 0 speculative", failed(shape{rf: T - 200, tk: rps(500)}.item(p))},
			{"update 0 retry", Result{}},
		},
	}, {
		name: "normal after a failed speculative write: the item needs its refill, its fh drifted",
		turns: []exchange{
			{"update 0 speculative", failed(shape{rf: T - 200, tk: rps(500), ahead: drifted}.item(p))},
			{"update 0 normal", Result{}},
		},
	}, {
		name: "full after a failed speculative write: the item is full, undated (no race lost)",
		turns: []exchange{
			{"update 0 speculative", failed(shape{rf: T - 5000, tk: rps(5000)}.item(p))},
			{"update 0 full", Result{}},
		},
		check: func(t *testing.T, _ *Charge, last Step, _ *Memory) {
			st := sim(t, shape{rf: T - 5000, tk: rps(5000)}.item(p))
			if r := exec(t, st, last); r.Err != nil || attr(t, st, ref, 0, "rf") != T {
				t.Fatalf("the full write: %v, rf %d; want rf = now (no cushion)", r.Err, attr(t, st, ref, 0, "rf"))
			}
		},
	}, {
		name: "reject: the item lacks the token even after refill; no more I/O",
		turns: []exchange{
			{"update 0 speculative", failed(shape{rf: T, tk: rps(0)}.item(p))},
			{"refused reject", Result{}},
		},
		check: func(t *testing.T, _ *Charge, last Step, m *Memory) {
			rl := last.Refused
			if rl.Local || rl.Img == nil || retryMs(t, rl) != 100 || m.View(ref, 0).Promise != T+100 {
				t.Fatalf("refusal local %v, img %v, retry %d ms, promise %d; want from the item, 100 ms, promised at T+100",
					rl.Local, rl.Img != nil, retryMs(t, rl), m.View(ref, 0).Promise-T)
			}
		},
	}, {
		name:  "local: the image, 50 ms old, refills to half a token; no call",
		knows: holds(shape{rf: T - 50, tk: rps(0)}, T-50),
		turns: []exchange{{"refused local", Result{}}},
		check: func(t *testing.T, _ *Charge, last Step, m *Memory) {
			if rl := last.Refused; !rl.Local || retryMs(t, rl) != 50 || m.View(ref, 0).Promise != T+50 {
				t.Fatalf("refusal local %v, retry %d ms, promise T+%d; want local, 50 ms, T+50",
					rl.Local, retryMs(t, rl), m.View(ref, 0).Promise-T)
			}
		},
	}, {
		name: "local with the others' drain: the image refills to a token, the others took half",
		knows: func(t *testing.T, m *Memory) {
			knows(t, m, ref, shape{rf: T - 100, tk: rps(0)}.item(p), 1, T-100)
			measured(m, ref, 0, 0.01, 0.01, T-100, map[string]float64{"rps": 5})
		},
		turns: []exchange{{"refused local", Result{}}},
		check: func(t *testing.T, _ *Charge, last Step, _ *Memory) {
			// 500 left, 500 more at the 5 a ms the others leave.
			if w := retryMs(t, last.Refused); w != 100 {
				t.Fatalf("retry after %d ms, want 100", w)
			}
		},
	}, {
		name:  "local refusals off: the same image goes to the store",
		knows: holds(shape{rf: T - 50, tk: rps(0)}, T-50),
		opts:  Options{NoLocalRefusals: true},
		turns: []exchange{{"update 0 speculative", Result{}}},
	}, {
		name:  "no local refusal from an image older than a second; the store refuses",
		knows: holds(shape{rf: T - 1200, tk: rps(-14000)}, T-1200),
		turns: []exchange{
			{"update 0 speculative", failed(shape{rf: T - 1200, tk: rps(-14000)}.item(p))},
			{"refused reject", Result{}},
		},
	}, {
		name: "double: the failed item shows wcu spent on a shard measured at its ceiling",
		plan: busy,
		knows: func(t *testing.T, m *Memory) {
			knows(t, m, ref, shape{rf: T - 1, tk: rps(8000)}.item(busy), 1, T-1)
			measured(m, ref, 0, 1, 0.9, T, nil)
		},
		rnd: picks(0, 1),
		turns: []exchange{
			{"update 0 speculative", failed(shape{rf: T, tk: hot(8000)}.item(busy))},
			{"update 0 double", wrote(shape{n: 2, rf: T, tk: hot(4000)}.item(busy))},
			{"update 1 speculative", Result{}},
		},
		check: func(t *testing.T, c *Charge, _ Step, m *Memory) {
			if c.n != 2 || m.Count(ref) != 2 || !m.grewRecently(ref, T) {
				t.Fatalf("count %d, remembered %d, grew %v; want 2, 2, true", c.n, m.Count(ref), m.grewRecently(ref, T))
			}
		},
	}, {
		name: "double lost to another client's: shard 0 counts 4 already",
		plan: busy,
		knows: func(t *testing.T, m *Memory) {
			knows(t, m, ref, shape{rf: T - 1, tk: rps(8000)}.item(busy), 1, T-1)
			measured(m, ref, 0, 1, 0.9, T, nil)
		},
		rnd: picks(0, 3),
		turns: []exchange{
			{"update 0 speculative", failed(shape{rf: T, tk: hot(8000)}.item(busy))},
			{"update 0 double", failed(shape{n: 4, rf: T, tk: hot(2000)}.item(busy))},
			{"update 3 speculative", Result{}},
		},
	}, {
		name: "no doubling past the request: a 1-token burst cannot be halved",
		plan: tight,
		knows: func(t *testing.T, m *Memory) {
			knows(t, m, ref, shape{rf: T - 10, tk: rps(1000)}.item(tight), 1, T-10)
			measured(m, ref, 0, 1, 0.9, T, nil)
		},
		turns: []exchange{
			{"update 0 full", failed(shape{rf: T, tk: hot(1000)}.item(tight))},
			{"update 0 normal", Result{}}, // heat alone is no answer
		},
		check: func(t *testing.T, _ *Charge, last Step, m *Memory) {
			if last.Err != nil || m.Count(ref) != 1 {
				t.Fatalf("err %v, %d shards; want the write made at one shard (the bucket cannot be split further)", last.Err, m.Count(ref))
			}
		},
	}, {
		name: "discover: shard 0 missing while shard 1 lives at 2 shards; recreated at 2",
		turns: []exchange{
			{"update 0 speculative", gone},
			{"query discover", listed(ref, 0, 1)}, // the index may still list shard 0
			{"get [1] discover", found(shape{shard: 1, n: 2, rf: T - 100, tk: rps(2000)}.item(p))},
			{"put 0 create", Result{}},
			{"done create", Result{}},
		},
		check: func(t *testing.T, c *Charge, _ Step, m *Memory) {
			// Half the burst (one of two shards) less the charge.
			if st, _ := c.Img.comp.Get("rps"); c.N != 2 || m.Count(ref) != 2 || c.Img.shardCount != 2 || st.Tokens != 4000 {
				t.Fatalf("made at %d shards (item %d, memory %d) holding %d; want 2 shards holding 4000", c.N, c.Img.shardCount, m.Count(ref), st.Tokens)
			}
		},
	}, {
		name:  "verify: shard 1 missing, shard 0 counts 2: made empty, then shard 0 serves",
		knows: sharded(2),
		rnd:   picks(1),
		turns: []exchange{
			{"update 1 speculative", gone},
			{"get [0] discover", found(shape{n: 2, rf: T, tk: rps(3000)}.item(p))},
			{"put 1 create", Result{}},
			{"update 0 speculative", Result{}},
		},
		check: func(t *testing.T, _ *Charge, _ Step, m *Memory) {
			if st, _ := m.View(ref, 1).Img.comp.Get("rps"); st.Tokens != 0 {
				t.Fatalf("the new shard 1 holds %d, want 0 (a doubled shard brings no tokens)", st.Tokens)
			}
		},
	}, {
		name:  "verify: shard 0 was made again at one shard: choose again at 1",
		knows: sharded(2),
		rnd:   picks(1),
		turns: []exchange{
			{"update 1 speculative", gone},
			{"get [0] discover", found(shape{rf: T, tk: rps(3000)}.item(p))},
			{"update 0 speculative", Result{}},
		},
		check: func(t *testing.T, _ *Charge, _ Step, m *Memory) {
			if m.Count(ref) != 1 {
				t.Fatalf("count %d, want 1", m.Count(ref))
			}
		},
	}, {
		name:  "verify: shard 0 is gone too: forget the bucket, start again at shard 0",
		knows: sharded(4),
		rnd:   picks(3),
		turns: []exchange{
			{"update 3 speculative", gone},
			{"get [0] discover", found(nil)},
			{"update 0 speculative", gone},
			{"query discover", Result{}},
		},
		check: func(t *testing.T, _ *Charge, _ Step, m *Memory) {
			if m.Count(ref) != 1 {
				t.Fatalf("count %d, want 1", m.Count(ref))
			}
		},
	}, {
		name:  "shard 0 shows fewer shards than remembered (made again): the count follows it",
		knows: sharded(2),
		turns: []exchange{
			{"update 0 speculative", failed(shape{rf: T, tk: rps(9000)}.item(p))},
			{"update 0 retry", Result{}},
		},
		check: func(t *testing.T, c *Charge, _ Step, m *Memory) {
			if c.n != 1 || m.Count(ref) != 1 {
				t.Fatalf("count %d, remembered %d; want 1", c.n, m.Count(ref))
			}
		},
	}, {
		name:  "throttled on a bucket of one shard: the throttle is the answer",
		turns: []exchange{{"update 0 speculative", throttle}, {"err", Result{}}},
	}, {
		name:  "throttled on a bucket of two shards: the other shard",
		knows: sharded(2),
		turns: []exchange{{"update 0 speculative", throttle}, {"update 1 speculative", Result{}}},
	}, {
		name: "the discovery query is throttled: the throttle is the answer",
		turns: []exchange{
			{"update 0 speculative", gone},
			{"query discover", throttle},
			{"err", Result{}},
		},
	}, {
		name: "the read of the siblings fails: the error, nothing made",
		turns: []exchange{
			{"update 0 speculative", gone},
			{"query discover", listed(ref, 1)},
			{"get [1] discover", unknown},
			{"err", Result{}},
		},
	}, {
		name:  "transaction conflict: nothing applied, the same write again",
		turns: []exchange{{"update 0 speculative", erred(store.ErrTransactionConflict)}, {"update 0 speculative", Result{}}},
	}, {
		name:  "outcome unknown: the error, which says the charge may stand",
		turns: []exchange{{"update 0 speculative", unknown}, {"err", Result{}}},
		check: func(t *testing.T, _ *Charge, last Step, _ *Memory) {
			if !store.OutcomeUnknown(last.Err) {
				t.Fatalf("err %v, want an unknown outcome", last.Err)
			}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := speculating(NewMemory(0))
			if tc.knows != nil {
				tc.knows(t, m)
			}
			pl, rnd := tc.plan, tc.rnd
			if pl == nil {
				pl = p
			}
			if rnd == nil {
				rnd = picks()
			}
			c := NewCharge(m, pl, rnd, tc.opts)
			last := converse(t, c.Start(T), c.Feed, T, tc.turns)
			if tc.check != nil {
				tc.check(t, c, last, m)
			}
		})
	}
}
