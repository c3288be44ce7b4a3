// Package limiter is distributed rate limiting with its state in Amazon
// DynamoDB: token buckets shared by every server of a service, with no
// lost updates, at one conditional write per admitted request.
//
// A bucket belongs to an (entity, resource) pair, such as an API key and a
// model, and holds several named limits (say 100 requests and 10,000 LLM
// tokens a minute). [Limiter.Acquire] charges all of them, all or
// nothing, in one write; the [Lease] it returns corrects the charge after
// the fact ([Lease.Adjust], for the real token count) or returns it
// ([Lease.Rollback]). Every answer carries the state of each limit
// ([Lease.Limits], [RateLimitedError].Limits): what applied, what remains,
// when it is full again, how long to wait. No extra round trip is needed to
// report it.
//
//	client := dynamo.NewClient(cfg)                       // the SDK client, with request-path retries and timeouts
//	_ = dynamo.CreateTable(ctx, client, "rate-limits")    // once, idempotent
//	lim, err := limiter.New(dynamo.New(client, "rate-limits"), limiter.WithNamespace("tenant-a"))
//
//	lease, err := lim.Acquire(ctx, limiter.Request{
//		Entity:   "key-3f9a",                             // an id, such as a hash of the API key
//		Resource: "gpt-4",
//		Limits:   []limiter.Limit{limiter.PerMinute("rpm", 100), limiter.PerMinute("tpm", 10_000)},
//		Consume:  map[string]int64{"rpm": 1, "tpm": 500}, // 500: an estimate
//	})
//	var rl *limiter.RateLimitedError
//	if errors.As(err, &rl) {
//		// refused, nothing charged: retry after rl.RetryAfter (rl.RetryAfterSeconds() for HTTP)
//	}
//	// ... call the model ...
//	err = lease.Adjust(ctx, map[string]int64{"tpm": used - 500}) // the real count; may go into debt
//	err = lease.Commit()
//
// Beyond a single bucket: an entity may cascade to a parent (a key to its
// project), charging both all or nothing; one acquire may charge several
// resources of the entity (Request.Also: the model and "all-models"), all
// or nothing; limits stored for an entity or a resource override the
// caller's. Operators set both up with package
// admin (the control plane: entities, stored limits, audit, usage,
// resets), which servers that only acquire need not import; a limiter
// reads them through its cache (WithCacheTTL). A bucket too hot for one
// DynamoDB partition shards itself. When DynamoDB fails, the limiter fails
// closed ([UnavailableError]) or, by choice, open ([FailOpen]).
//
// Related packages: store/dynamo is the DynamoDB backend (client settings,
// table provisioning); store/memsim an in-memory DynamoDB for unit tests;
// httplimit the net/http middleware (RateLimit header fields, 429 problem
// details); dynamotest runs DynamoDB Local for integration tests; sim the
// deterministic simulator that checks the limiter's invariants.
//
// # JSON
//
// [Limit] and [LimitState] (and package admin's types) have JSON forms
// with snake_case names and durations as Go duration strings ("1m0s",
// "250ms"; any form time.ParseDuration reads is accepted):
//
//	{"name":"tpm","capacity":10000,"burst":20000,"refill":10000,"period":"1m0s"}
//
// They round-trip: unmarshalling what was marshalled gives the same value.
// Unmarshalling checks only that the JSON decodes; validate limits with
// [Limit.Validate].
//
// # Documentation
//
// The repository's docs directory has the guides: docs/limiter.md (using
// the limiter), docs/dynamodb.md (client settings, table, IAM, testing on
// DynamoDB Local), docs/write-paths.md and docs/sharding.md (how a request
// becomes a write, and why it is correct), docs/aggregator.md (usage
// snapshots and proactive sharding) and docs/simulation.md.
package limiter
