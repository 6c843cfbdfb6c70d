# The README's test command is `make test`; CI (.ci/run) calls it too.
GO ?= go
STATICCHECK ?= v0.8.2

.PHONY: test vet lint race unit bench fuzz build up

## test: install system test dependencies where possible, vet, and run every test with -race.
test:
	bash scripts/test.sh

## vet: go vet over the whole module.
vet:
	$(GO) vet ./...

## lint: go vet and staticcheck (fetched through the module proxy on first use).
lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) ./...

## unit: the tests without the race detector (faster local loop).
unit:
	$(GO) test ./...

## race: the tests with the race detector, without the system-package step.
race:
	$(GO) test -race ./...

## bench: the Go benchmarks (side-by-side figures come from `switchyard bench`).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

## fuzz: a short run of every fuzz target (FUZZTIME: inputs like 20000x, the default, or a duration).
fuzz:
	bash scripts/fuzz.sh

build:
	$(GO) build -o bin/switchyard ./cmd/switchyard

up:
	$(GO) run ./cmd/switchyard up
