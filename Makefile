# diskless: one command per job. `make test` is all a fresh machine needs.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 15s
BENCHTIME ?= 1s
BENCHCOUNT ?= 5

.PHONY: test deps vet bench fuzz stress sim simfixed lint

## test: install what the tests need, then vet and run every test under
## -race; then the simulation's fixed seeds once more without it, all of
## them (simfixed; under -race TestClusterSeeds runs 10 of its 100 and
## TestSeeds 3 of its 6).
test: deps vet
	$(GO) test -race -timeout 20m $(PKGS)
	@$(MAKE) --no-print-directory simfixed

## simfixed: the simulation's fixed seeds without -race, in two processes
## (a seed's bubble seeds crypto/rand for the whole process, so the seeds
## of one process run one at a time, on about 1.3 cores): TestSeeds in
## one, TestClusterSeeds and TestFoundBugs in the other. Each prints its
## output once it ends.
simfixed:
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	$(GO) test -c -o "$$dir/sim.test" ./internal/sim || exit 1; \
	cd internal/sim || exit 1; start=$$(date +%s); \
	"$$dir/sim.test" -test.count=1 -test.timeout 10m -test.run '^TestSeeds$$' > "$$dir/seeds.log" 2>&1 & a=$$!; \
	"$$dir/sim.test" -test.count=1 -test.timeout 10m -test.run '^(TestClusterSeeds|TestFoundBugs)$$' > "$$dir/cluster.log" 2>&1; b=$$?; \
	wait $$a; a=$$?; \
	echo "TestSeeds:"; cat "$$dir/seeds.log"; echo "TestClusterSeeds, TestFoundBugs:"; cat "$$dir/cluster.log"; \
	echo "simfixed: $$(( $$(date +%s) - start )) s"; [ $$a -eq 0 ] && [ $$b -eq 0 ]

VERSITYGW ?= github.com/versity/versitygw/cmd/versitygw@v1.8.0

## ETCD: where deps builds the etcd server that internal/etcdtest starts,
## from the module in tools/etcd (which pins the release). The tests look
## there, unless $DISKLESS_ETCD names another binary.
ETCD := $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin/diskless-etcd

## deps: download the modules, install the real S3 server the tests start
## (Versity's S3 gateway; about a minute the first time, cached after), and
## build the etcd server (about two minutes the first time; after that
## go build finds it up to date in a second, and relinks it only when
## tools/etcd changed).
deps:
	$(GO) mod download
	@command -v versitygw >/dev/null 2>&1 || test -x "$$($(GO) env GOPATH)/bin/versitygw" || \
		{ echo "installing $(VERSITYGW)"; GOFLAGS=-buildvcs=false $(GO) install $(VERSITYGW); }
	cd tools/etcd && $(GO) build -buildvcs=false -o $(ETCD) .

vet:
	$(GO) vet $(PKGS)

## bench: run every benchmark, BENCHCOUNT times each (compare with benchstat).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) $(PKGS)

## fuzz: run every fuzz target for FUZZTIME each (their seeds and the
## corpora in testdata/fuzz also run in `make test`). An input that fails
## lands in the package's testdata/fuzz/FuzzX/: fix the bug and keep the
## file. FUZZMINIMIZETIME bounds the shrinking of each new input, which
## could otherwise take a short run's whole FUZZTIME. Go 1.26's fuzzer may
## fail a run with a bare "context deadline exceeded" as FUZZTIME ends
## (go.dev/issue/75804, fixed in Go 1.27): with no failing input written,
## that is reported and not counted as a failure.
FUZZMINIMIZETIME ?= 5s
fuzz:
	@set -e; out=$$(mktemp); \
	for pkg in $$($(GO) list $(PKGS)); do \
		dir=$$($(GO) list -f '{{.Dir}}' $$pkg)/testdata/fuzz; \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$t"; \
			before=$$(ls $$dir/$$t 2>/dev/null | wc -l); \
			( set +e; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) $$pkg 2>&1; \
			  echo $$? >$$out.rc ) | tee $$out; \
			if [ "$$(cat $$out.rc)" != 0 ]; then \
				if [ "$$(ls $$dir/$$t 2>/dev/null | wc -l)" = "$$before" ] && \
				   tail -n 5 $$out | grep -q '^    context deadline exceeded$$'; then \
					echo "(go.dev/issue/75804: no failing input was found; not a failure)"; \
				else rm -f $$out $$out.rc; exit 1; fi; \
			fi; \
		done; \
	done; \
	rm -f $$out $$out.rc

STRESSFOR    ?= 2m
STRESSKILLS  ?= 200
STRESSROUNDS ?= 200

## stress: the reliability tests, longer, under -race: TestBrokerCrash kills
## the broker STRESSKILLS times and goes on for STRESSFOR at least;
## TestFaultInjection produces for 20 s in each phase; TestContention moves
## the leadership STRESSROUNDS times (half as many over the S3 server), with
## the coordinator's fencing and crash tests beside it; TestClusterFreeze
## (SIGSTOP of a group's coordinator) 5 times. About 13 minutes with the
## defaults.
stress: deps
	$(GO) test -race -count=1 -timeout 60m -run 'Crash|Fault' -v . \
		-args -crash.kills $(STRESSKILLS) -crash.for $(STRESSFOR) -fault.phase 20s
	$(GO) test -race -count=1 -timeout 60m -run 'Contention|Fencing|Crash' -v ./coordinator \
		-args -contention.rounds $(STRESSROUNDS) -contention.commits 64
	$(GO) test -race -count=5 -timeout 20m -run 'TestClusterFreeze' -v ./examples/kafka-broker

SEEDS       ?= 20
SIMDURATION ?= 2m

## sim: the deterministic simulation (internal/sim) of SEEDS random seeds,
## SIMDURATION of workload each (2 minutes, as the fixed cluster seeds;
## then two quiet minutes, the final read and twenty minutes of the
## objects' lifecycle), of clusters of BROKERS brokers (1: a broker
## alone, about 7 s of wall time per simulated hour): each failing
## seed is printed with the guarantee it violated and its last 50 events,
## then the faults per simulated hour by kind, and the last line sums up:
## "sim: N seeds, H simulated hours, F faults, V violations". Run a failing seed again
## with SEEDS=1 SEED=<seed>; REPLAY=true runs each seed twice and counts
## those whose two traces match (Go's scheduler is free to order the
## goroutines of one virtual instant differently). The seeds are shared
## among SIMPROCS processes (one run uses about 1.2 cores), each printing
## a progress line every 100 seeds as it goes, and its own lines at the
## end; the last line sums theirs.
SEED     ?= 0
REPLAY   ?= false
BROKERS  ?= 3
SIMPROCS ?= $(shell nproc 2>/dev/null || echo 1)
sim:
	@dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	$(GO) test -c -o "$$dir/sim.test" ./internal/sim || exit 1; \
	procs=$(SIMPROCS); [ $(SEEDS) -ge $$procs ] || procs=$(SEEDS); \
	for p in $$(seq 1 $$procs); do \
		n=$$(( ($(SEEDS) + procs - p) / procs )); \
		(cd internal/sim && "$$dir/sim.test" -test.count=1 -test.timeout 0 -test.run '^TestSim$$' -test.v \
			-seeds $$n -seed $(SEED) -sim.duration $(SIMDURATION) -sim.replay=$(REPLAY) -sim.brokers $(BROKERS); \
			echo "exit $$?") 2>&1 | tee "$$dir/$$p.log" | grep --line-buffered '^sim: progress' & \
	done; wait; \
	for p in $$(seq 1 $$procs); do grep -v -e '^exit ' -e '^sim: progress' "$$dir/$$p.log"; done; \
	cat "$$dir"/*.log | awk '/^sim: [0-9]+ seeds,/ { n += $$2; h += $$4; f += $$7; v += $$9 } \
		/^exit / && $$2 != 0 { bad = 1 } \
		END { printf "sim: %d seeds, %.1f simulated hours, %d faults, %d violations\n", n, h, f, v; exit (bad || v > 0) }'

## lint: gofmt, go vet and go mod tidy must leave the tree unchanged.
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@cp go.mod /tmp/diskless-go.mod.bak; cp go.sum /tmp/diskless-go.sum.bak; \
	$(GO) mod tidy; \
	if ! git diff --quiet -- go.mod go.sum; then \
		echo "go mod tidy changes go.mod/go.sum"; git diff -- go.mod go.sum; \
		cp /tmp/diskless-go.mod.bak go.mod; cp /tmp/diskless-go.sum.bak go.sum; exit 1; \
	fi
