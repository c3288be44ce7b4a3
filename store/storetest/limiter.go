package storetest

import (
	"github.com/shardlimit/limiter/store"
)

// The limiter's own request shapes, exactly as it sends them.

var limiterCases = []testCase{
	// 50000 tokens cover 9999 (numerically; lexically "50000" < "9999"), on
	// a key of the limiter's shape.
	{"SpeculativeConsume/Granted", func(f *fixture) {
		k := store.Key{PK: "NS#default#ENT#user-1", SK: "#BUCKET#gpt-4"}
		f.put(item(k, bucket(50000, 5000)...))
		out, err := consume(speculative(9999))(f, k)
		if err != nil {
			f.t.Fatalf("speculative consume: %v", err)
		}
		want := item(k, bucket(50000-9999, 5000-wcuCost, "b_rpm_tc", 9999, "b_wcu_tc", wcuCost)...)
		expectAttrs(f.t, "ALL_NEW", want, out.Attributes)
		expectWriteUnits(f.t, "speculative consume", out.Consumed)
		f.expect(k, want)
	}},
	// Exactly enough tokens is enough (>=), leaving 0.
	{"SpeculativeConsume/GrantedAtBoundary", steps(bucket(3000, wcuCost), step{
		call: consume(speculative(3000)),
		got:  bucket(0, 0, "b_rpm_tc", 3000, "b_wcu_tc", wcuCost), after: bucket(0, 0, "b_rpm_tc", 3000, "b_wcu_tc", wcuCost),
	})},
	// Too few rpm tokens: the limiter gets the item (to compute a
	// retry-after) and nothing changes.
	{"SpeculativeConsume/DeniedByTokens", steps(bucket(9999, 5000), step{
		call: consume(speculative(50000)), failed: true, got: bucket(9999, 5000), after: bucket(9999, 5000),
	})},
	// The rpm limit has room, the wcu limit not.
	{"SpeculativeConsume/DeniedByWCU", steps(bucket(50000, wcuCost-1), step{
		call: consume(speculative(1)), failed: true, got: bucket(50000, wcuCost-1), after: bucket(50000, wcuCost-1),
	})},
	// attribute_exists(PK) keeps the ADDs from creating a bucket: the
	// condition fails with no item and nothing is created.
	{"SpeculativeConsume/MissingBucket", steps(nil, step{call: consume(speculative(1)), failed: true})},
	// The first write of a process to a bucket that may not exist yet:
	// attribute_not_exists(PK) OR the usual condition, every ADD made
	// SET a = if_not_exists(a, start) + d. It creates a missing bucket
	// full less the charge, consumes from an existing one as the
	// speculative write does, and fails like it.
	{"CreateOrConsume/Missing", steps(nil, step{
		call:  consume(createOrConsume(3000)),
		got:   bucket(100000-3000, 5000-wcuCost, "b_rpm_tc", 3000, "b_wcu_tc", wcuCost),
		after: bucket(100000-3000, 5000-wcuCost, "b_rpm_tc", 3000, "b_wcu_tc", wcuCost),
	})},
	{"CreateOrConsume/Existing", steps(bucket(50000, 5000, "b_rpm_tc", 7), step{
		call:  consume(createOrConsume(3000)),
		got:   bucket(50000-3000, 5000-wcuCost, "b_rpm_tc", 3007, "b_wcu_tc", wcuCost),
		after: bucket(50000-3000, 5000-wcuCost, "b_rpm_tc", 3007, "b_wcu_tc", wcuCost),
	})},
	{"CreateOrConsume/Denied", steps(bucket(2999, 5000), step{
		call: consume(createOrConsume(3000)), failed: true, got: bucket(2999, 5000), after: bucket(2999, 5000),
	})},
	// The refill is claimed and rf moves forward.
	{"NormalConsume/Granted", steps(bucket(1000, 5000), step{
		call:  consume(normal(20000, 50000, rfStart, rfStart+30000)),
		got:   bucket(1000+50000-20000, 5000-wcuCost, "b_rpm_tc", 20000, "b_wcu_tc", wcuCost, "rf", int64(rfStart+30000)),
		after: bucket(1000+50000-20000, 5000-wcuCost, "b_rpm_tc", 20000, "b_wcu_tc", wcuCost, "rf", int64(rfStart+30000)),
	})},
	// Another writer moved rf; the condition rf = :expected fails and the
	// current item comes back.
	{"NormalConsume/StaleRefill", steps(bucket(100000, 5000), step{
		call: consume(normal(1, 10, rfStart-1000, rfStart+1000)), failed: true, got: bucket(100000, 5000), after: bucket(100000, 5000),
	})},
	// Limit names with '-', '.', '_' and the reserved word ttl work as
	// attribute names in updates and conditions (the builders send them as
	// placeholders).
	{"AttributeNames", func(f *fixture) {
		k := key("names")
		base := item(k,
			"b_gpt-3.5_tk", 10,
			"b_rate-limit_tk", 10,
			"b_a_b_tk", 10,
			"a_b", "x",
			"ttl", int64(1700000000),
		)
		out, err := f.s.Put(f.ctx, store.PutInput{
			Item: base,
			Expr: f.expr(store.Update{}, store.And(store.Name(store.AttrPK).NotExists(), store.Name("ttl").NotExists())),
		})
		if err != nil {
			f.t.Fatalf("Put with a condition on ttl: %v", err)
		}
		expectWriteUnits(f.t, "Put", out.Consumed)

		u := store.Update{}.
			Add("b_gpt-3.5_tk", store.Int(-1)).
			Add("b_rate-limit_tk", store.Int(-2)).
			Add("b_a_b_tk", store.Int(-3)).
			Set("a_b", store.Str("y")).
			Set("ttl", store.Int(1700000600))
		cond := store.And(
			store.Name("b_gpt-3.5_tk").GreaterThanEqual(store.Int(1)),
			store.Name("b_rate-limit_tk").GreaterThanEqual(store.Int(2)),
			store.Name("b_a_b_tk").GreaterThanEqual(store.Int(3)),
			store.Name("a_b").Equal(store.Str("x")),
			store.Name("ttl").Exists(),
			store.Name("ttl").LessThan(store.Int(1700000600)),
		)
		res, err := f.s.Update(f.ctx, store.UpdateInput{Key: k, Expr: f.expr(u, cond), Return: store.ReturnUpdatedNew})
		if err != nil {
			f.t.Fatalf("Update: %v", err)
		}
		expectAttrs(f.t, "UPDATED_NEW", attrs(
			"b_gpt-3.5_tk", 9, "b_rate-limit_tk", 8, "b_a_b_tk", 7, "a_b", "y", "ttl", int64(1700000600),
		), res.Attributes)
		after := item(k, "b_gpt-3.5_tk", 9, "b_rate-limit_tk", 8, "b_a_b_tk", 7, "a_b", "y", "ttl", int64(1700000600))
		f.expect(k, after)

		// The same condition is now false (a_b is "y").
		_, err = f.s.Update(f.ctx, store.UpdateInput{Key: k, Expr: f.expr(u, cond), ReturnOldOnConditionFailure: true})
		expectConditionFailed(f.t, err, after)

		f.update(k, store.Update{}.Remove("ttl").Remove("b_gpt-3.5_tk"), store.Name("ttl").Exists(), store.ReturnNone)
		f.expect(k, item(k, "b_rate-limit_tk", 8, "b_a_b_tk", 7, "a_b", "y"))
	}},
}

const (
	wcuCost = 1000          // millitokens of the wcu limit one acquire consumes
	rfStart = 1700000000000 // the bucket's refill time, Unix ms
)

// bucket is the attributes of a composite bucket with an rpm and a wcu
// limit, then the attributes kv (which override them).
func bucket(rpmTokens, wcuTokens int64, kv ...any) []any {
	return append([]any{
		"b_rpm_tk", rpmTokens, "b_rpm_cp", 100000, "b_rpm_bx", 100000, "b_rpm_ra", 100000, "b_rpm_rp", 60000, "b_rpm_tc", 0,
		"b_wcu_tk", wcuTokens, "b_wcu_cp", 5000, "b_wcu_bx", 5000, "b_wcu_ra", 5000, "b_wcu_rp", 1000, "b_wcu_tc", 0,
		"rf", int64(rfStart),
	}, kv...)
}

// speculative is the limiter's speculative consume of c millitokens:
//
//	ADD b_rpm_tk :-c, b_rpm_tc :c, b_wcu_tk :-1000, b_wcu_tc :1000
//	condition attribute_exists(PK) AND b_rpm_tk >= :c AND b_wcu_tk >= :1000
func speculative(c int64) (store.Update, store.Condition) {
	u := store.Update{}.
		Add("b_rpm_tk", store.Int(-c)).
		Add("b_rpm_tc", store.Int(c)).
		Add("b_wcu_tk", store.Int(-wcuCost)).
		Add("b_wcu_tc", store.Int(wcuCost))
	cond := store.And(
		store.Name(store.AttrPK).Exists(),
		store.Name("b_rpm_tk").GreaterThanEqual(store.Int(c)),
		store.Name("b_wcu_tk").GreaterThanEqual(store.Int(wcuCost)),
	)
	return u, cond
}

// createOrConsume is the limiter's first write to a bucket that may not
// exist (engine.Plan.orCreate), in the shape of speculative:
//
//	SET b_rpm_tk = if_not_exists(b_rpm_tk, :burst) - c, b_rpm_tc =
//	if_not_exists(b_rpm_tc, :0) + c, (the same for wcu), the limits' fields
//	and rf = if_not_exists(...)
//	condition attribute_not_exists(PK) OR (b_rpm_tk >= :c AND b_wcu_tk >= :1000)
func createOrConsume(c int64) (store.Update, store.Condition) {
	u := store.Update{}.
		SetIfNotExistsPlus("b_rpm_tk", store.Int(100000), store.Int(-c)).
		SetIfNotExistsPlus("b_rpm_tc", store.Int(0), store.Int(c)).
		SetIfNotExistsPlus("b_wcu_tk", store.Int(5000), store.Int(-wcuCost)).
		SetIfNotExistsPlus("b_wcu_tc", store.Int(0), store.Int(wcuCost))
	for _, kv := range [][2]any{{"b_rpm_cp", 100000}, {"b_rpm_bx", 100000}, {"b_rpm_ra", 100000}, {"b_rpm_rp", 60000},
		{"b_wcu_cp", 5000}, {"b_wcu_bx", 5000}, {"b_wcu_ra", 5000}, {"b_wcu_rp", 1000}, {"rf", rfStart}} {
		u = u.SetIfNotExists(kv[0].(string), store.Int(int64(kv[1].(int))))
	}
	cond := store.Or(store.Name(store.AttrPK).NotExists(), store.And(
		store.Name("b_rpm_tk").GreaterThanEqual(store.Int(c)),
		store.Name("b_wcu_tk").GreaterThanEqual(store.Int(wcuCost)),
	))
	return u, cond
}

// normal is the limiter's normal consume: it claims the refill since
// expectedRF (refill millitokens) and moves rf to now.
//
//	ADD b_rpm_tk :refill-c, b_rpm_tc :c, b_wcu_tk :-1000, b_wcu_tc :1000 SET rf = :now
//	condition rf = :expected AND b_rpm_tk >= :c-refill AND b_wcu_tk >= :1000
func normal(c, refill, expectedRF, now int64) (store.Update, store.Condition) {
	u := store.Update{}.
		Add("b_rpm_tk", store.Int(refill-c)).
		Add("b_rpm_tc", store.Int(c)).
		Add("b_wcu_tk", store.Int(-wcuCost)).
		Add("b_wcu_tc", store.Int(wcuCost)).
		Set("rf", store.Int(now))
	cond := store.And(
		store.Name("rf").Equal(store.Int(expectedRF)),
		store.Name("b_rpm_tk").GreaterThanEqual(store.Int(c-refill)),
		store.Name("b_wcu_tk").GreaterThanEqual(store.Int(wcuCost)),
	)
	return u, cond
}

// consume is a step's Update of the limiter's shape: ALL_NEW, and the old
// item on a failed condition.
func consume(u store.Update, c store.Condition) func(*fixture, store.Key) (store.WriteOutput, error) {
	return func(f *fixture, k store.Key) (store.WriteOutput, error) {
		return f.s.Update(f.ctx, store.UpdateInput{Key: k, Expr: f.expr(u, c), Return: store.ReturnAllNew, ReturnOldOnConditionFailure: true})
	}
}
