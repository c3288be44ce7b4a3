package main

// A target is a package whose code is mutated, with the tests that judge
// its mutants: a fast selection, run in order, cheapest and most telling
// first. A mutant is killed by the first run that fails (or times out);
// the runs after it are skipped.
type target struct {
	name  string
	dir   string   // the package, relative to the module root
	files []string // the files to mutate; nil: every non-test file
	runs  []testRun
}

// A testRun is one test binary run: the package whose tests it is, the
// tests it selects (-test.run, -test.skip) and extra flags.
type testRun struct {
	dir   string
	run   string
	skip  string
	flags []string
}

// rapidFlags make a rapid test reproducible and quick for a mutant: a fixed
// seed, no shrinking worth the name, and no fail files written into the
// worktree (a mutant's failure is not a regression to keep).
func rapidFlags(checks string) []string {
	return []string{"-rapid.checks=" + checks, "-rapid.seed=1", "-rapid.shrinktime=1ms", "-rapid.nofailfile"}
}

// onDynamoDBLocal names the tests that start DynamoDB Local: seconds of
// JVM start-up per mutant, and store/dynamo, not these targets, is what
// they exercise. storetest runs the same contract on memsim.
const onDynamoDBLocal = "DynamoDBLocal"

// The root package's tests without the property test, and the property
// test at a small budget: ten generated configurations (100 to 256
// writers each) in about a second.
var (
	rootUnit     = testRun{dir: ".", skip: "TestProperty|" + onDynamoDBLocal, flags: rapidFlags("100")}
	rootProperty = testRun{dir: ".", run: "^TestProperty$", flags: rapidFlags("10")}
)

var targets = []target{
	{
		// The write protocol: every decision of every write path.
		name: "engine", dir: "internal/engine",
		runs: []testRun{
			{dir: "internal/engine", flags: rapidFlags("20")},
			rootUnit, rootProperty,
		},
	},
	{
		// Token-bucket math and the item codec.
		name: "bucket", dir: "bucket",
		runs: []testRun{
			{dir: "bucket", flags: rapidFlags("100")},
			{dir: "internal/engine", flags: rapidFlags("20")},
			rootUnit, rootProperty,
		},
	},
	{
		// The key layout and the doubling write, shared with the
		// aggregator.
		name: "keys", dir: "internal/keys",
		runs: []testRun{
			{dir: "internal/keys"},
			{dir: "internal/engine", flags: rapidFlags("20")},
			rootUnit,
			{dir: "aggregator", skip: onDynamoDBLocal},
			rootProperty,
		},
	},
	{
		// DynamoDB in memory: its own tests include the storetest
		// conformance suite and the linearizability check.
		name: "memsim", dir: "store/memsim",
		runs: []testRun{
			{dir: "store/memsim"},
			rootUnit,
		},
	},
	{
		// memsim's expression language: parser, binder, evaluator.
		name: "expr", dir: "store/memsim/internal/expr",
		runs: []testRun{
			{dir: "store/memsim/internal/expr"},
			{dir: "store/memsim"},
		},
	},
	{
		// Usage snapshots and proactive sharding from the change stream.
		name: "aggregator", dir: "aggregator",
		runs: []testRun{
			{dir: "aggregator", skip: onDynamoDBLocal},
		},
	},
}
