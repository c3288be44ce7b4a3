// Package sim is the limiter's deterministic simulation: a discrete-event
// scheduler on virtual time that runs many simulated clients, each with its
// own limiter.Limiter (own caches, clock, seeded random source), against
// one simulated DynamoDB (store/memsim), and checks every run against the
// limiter's eight invariants (docs/simulation.md lists them).
//
// The scheduler owns all concurrency at store-operation granularity. Each
// client is a coroutine (iter.Pull) running ordinary limiter code; its
// store.Store handle yields every call to the scheduler, which applies it to
// the shared memsim at its send time plus a drawn request latency (memsim's
// clock is the virtual time) and resumes the client at the apply time plus a
// response latency, or at the call's deadline. WriteConcurrently's writes
// are requests of their own. Nothing on the simulated path reads the wall
// clock, the global random source, map order or Go's scheduler: the same
// Config gives the same Report and trace hash.
//
// Run a named scenario:
//
//	rep, err := sim.Run(sim.Config{Scenario: "faults", Seed: 7})
//	if err == nil && !rep.OK() {
//		for _, v := range rep.Violations {
//			fmt.Println(v.Invariant, v.Detail)
//		}
//	}
//
// or a Workload of your own (Config.Workload), as the property test at the
// repository root does. cmd/simulate is the command line; docs/simulation.md
// is the guide (scenarios, the report's fields, the exact accounting of each
// invariant, speed).
package sim
