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

VERSITYGW ?= github.com/versity/versitygw/cmd/versitygw@v1.8.0

## deps: download the modules, and install the real S3 server the tests
## start (Versity's S3 gateway; about a minute the first time, cached after).
deps:
	$(GO) mod download
	@command -v versitygw >/dev/null 2>&1 || test -x "$$($(GO) env GOPATH)/bin/versitygw" || \
		{ echo "installing $(VERSITYGW)"; GOFLAGS=-buildvcs=false $(GO) install $(VERSITYGW); }

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
