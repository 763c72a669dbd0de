# dspark — see README.md. Every target works on a fresh machine with only Go installed.
GO        ?= go
PKGS      := ./...
FUZZTIME  ?= 3s
LONGFUZZ  ?= 5m
BIN       := bin/dspark

.PHONY: all build demo test vet race test-purego fuzz-short fuzz lint bench bench-convert bench-run k3-full clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/dspark

## demo: the main job — runs the embedded demo pair (or, before the runtime exists, a small GGUF round trip).
demo: build
	./scripts/demo.sh $(BIN)

## test: vet, the race-enabled test suite (both kernel paths), and a short run of every fuzz target.
test: vet race test-purego fuzz-short

vet:
	$(GO) vet $(PKGS)

race:
	$(GO) test -race -count=1 $(PKGS)

# The portable (non-assembly) kernel path, forced by the purego build tag.
test-purego:
	$(GO) test -count=1 -tags purego ./runtime/...

fuzz-short:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

## fuzz: a long fuzz session of every target.
fuzz:
	FUZZTIME=$(LONGFUZZ) ./scripts/fuzz.sh

## lint: gofmt check and go vet.
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## bench: every Go benchmark once (headline figures with their limits; see docs/benchmarks.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 $(PKGS)

clean:
	rm -rf bin
