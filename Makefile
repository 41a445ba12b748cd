# diskless: one command per job. `make test` is all a fresh machine needs.
GO        ?= go
PKGS      ?= ./...
FUZZTIME  ?= 15s
BENCHTIME ?= 1s
BENCHCOUNT ?= 5

.PHONY: test deps vet bench fuzz lint

## test: install what the tests need, then vet and run every test under -race.
test: deps vet
	$(GO) test -race -timeout 20m $(PKGS)

## deps: download the modules the build and tests use.
deps:
	$(GO) mod download

vet:
	$(GO) vet $(PKGS)

## bench: run every benchmark, BENCHCOUNT times each (compare with benchstat).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) $(PKGS)

## fuzz: run every fuzz target for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$t"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

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
