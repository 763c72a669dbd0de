# dspark — see README.md. Every target works on a fresh machine with only Go installed.
GO        ?= go
PKGS      := ./...
FUZZTIME  ?= 3s
LONGFUZZ  ?= 5m
BIN       := bin/dspark

.PHONY: all build demo test test-short bench-report vet race test-purego test-paths test-demo fuzz-short fuzz lint bench \
	bench-convert bench-synth bench-run bench-qwen35 bench-kimi bench-demo bench-schedule bench-schedule-bound bench-calibrate bench-llamacpp k3-full demo-assets demo-qwen35 bench-demo-qwen35 clean \
	vet-cross test-cross dist check-nofma

all: build

build:
	$(GO) build -o $(BIN) ./cmd/dspark

## demo: the main job — runs the embedded demo pair (target + DSpark draft, greedy speculative
## decoding against plain decoding, acceptance and measured speedup).
demo: build
	./$(BIN) run

## demo-qwen35: the hybrid demo pair (a Qwen3.5 target of Gated DeltaNet and gated attention
## blocks, a GQA DSpark draft derived from it; built into the user cache on first use), plain
## against speculative decoding with rollback's share of a round.
demo-qwen35: build
	./$(BIN) run --demo qwen35

## test: vet, the race-enabled test suite, the portable kernel path, which kernel paths this
## machine tested, the demo-asset rebuild, and a short run of every fuzz target.
test: vet race test-purego test-paths test-demo fuzz-short

## test-short: the inner loop (35-60 s here): every package with -short, which skips the
## demo pair builds, the kernel generator rerun, the 4-token enumeration worlds and the full
## kernel path matrix (each skip says so); `make test` runs everything.
test-short:
	$(GO) test -short -count=1 $(PKGS)

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags purego ./runtime/...

race:
	$(GO) test -race -count=1 $(PKGS)

# The portable (non-assembly) kernels, forced by the purego build tag.
test-purego:
	$(GO) test -count=1 -tags purego ./runtime/...

# One line per kernel path: tested here, or not (and why). go test hides the output of
# passing tests, so the report test runs verbose and only its lines are shown.
test-paths:
	@for tags in "" purego; do \
		out=$$($(GO) test -count=1 -tags "$$tags" -run '^TestKernelPaths$$' -v ./runtime/kernels) || { echo "$$out"; exit 1; }; \
		printf '%s\n' "$$out" | grep '^kernels:' | sed "s/^/[tags=$${tags:-default}] /"; \
	done

# Rebuilding the embedded demo pair and building the English pair's test recipe are too slow
# under -race, and so is the calibration fit on synthetic data; they run here without it.
test-demo:
	$(GO) test -count=1 -run 'TestAssetsReproducible|TestEnglish|TestOpenCache|TestQwen35|TestOpenQwen35' ./internal/demo
	$(GO) test -count=1 -run 'TestFitRecoversTemperatures' ./calibrate
	$(GO) test -count=1 -run 'TestRunDemoQwen35' ./cmd/dspark

fuzz-short:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

## fuzz: a long fuzz session of every target.
fuzz:
	FUZZTIME=$(LONGFUZZ) ./scripts/fuzz.sh

## lint: gofmt check and go vet.
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## bench: every Go benchmark once (headline figures with their same-run limits; see docs/benchmarks.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 20x -count 1 $(PKGS)

## bench-report: the table of docs/benchmarks.md measured on this machine in one run, with the
## commit and the CPU (paste it into the doc). Builds the demo pair on first use (about a
## minute); the llama.cpp row needs node/npm; DSPARK_BENCH_FULL=1 adds convert vs cp and the
## k3-full block (17 GB of disk, minutes).
bench-report: build
	$(GO) run ./scripts/benchreport -bin $(BIN)

## bench-convert: convert of the full-size synthetic K3 draft vs cp of the same bytes, peak RSS.
bench-convert: build
	./scripts/bench-convert.sh $(BIN)

## bench-convert-kimi: convert of the real-slice Kimi-K3 target (MXFP4 experts) vs cp, peak RSS.
bench-convert-kimi: build
	./scripts/bench-convert-kimi.sh $(BIN)

## bench-synth: synth of the full-size K3 draft vs cp of the same size (same run), peak RSS.
bench-synth: build
	./scripts/bench-synth.sh $(BIN)

## bench-run: target decode and speculative figures on the small preset pair.
bench-run: build
	./scripts/bench-run.sh $(BIN)

## bench-qwen35: qwen35 and qwen35moe decode against the same-run read of the step's weight
## bytes and verify-8 / step, 1 and 2 threads, on the small targets the benchmark synthesizes
## (DSPARK_BENCH_QWEN35=FILE.gguf: that file instead).
bench-qwen35:
	$(GO) test -run '^$$' -bench '^Benchmark(TargetDecode|Verify8)$$' -benchtime 10x -count 5 ./runtime/qwen35

## bench-kimi: kimi-k3 decode against the same-run read of the step's weight bytes and
## verify-8 / step, 1 and 2 threads, on the small K3 target the benchmark synthesizes
## (~213 MB read per step; DSPARK_BENCH_KIMI=FILE.gguf: that file instead).
bench-kimi:
	$(GO) test -run '^$$' -bench '^Benchmark(TargetDecode|Verify8)$$' -benchtime 10x -count 5 ./runtime/kimik3

## bench-demo: the English demo pair's speedup, tau and cost split at one and two threads,
## greedy and sampled (builds the pair into the cache first if needed; DSPARK_DEMO_CACHE).
bench-demo:
	$(GO) test -run '^$$' -bench '^BenchmarkDemo$$' -benchtime 3x -count 1 ./cmd/dspark

## bench-demo-qwen35: the same figures on the qwen35 hybrid pair, with rollback's share of a round.
bench-demo-qwen35:
	DSPARK_DEMO_PAIR=qwen35 $(GO) test -run '^$$' -bench '^BenchmarkDemo$$' -benchtime 3x -count 1 ./cmd/dspark

## bench-schedule: on the English demo pair, the verify scheduler against full blocks in one
## process, greedy and sampled (paired alternating runs, median ratio of tokens per second).
bench-schedule:
	$(GO) test -run '^$$' -bench '^BenchmarkSchedule$$' -benchtime 9x -count 1 ./cmd/dspark

## bench-schedule-bound: on the English demo pair, what any verify schedule could gain over
## full blocks with this machine's measured costs (an oracle that knows each block's outcome,
## the draft's head, a head refitted to greedy acceptance; about 8 minutes).
bench-schedule-bound:
	$(GO) test -run '^$$' -bench '^BenchmarkScheduleBound$$' -benchtime 1x -count 1 -timeout 60m ./internal/demo

## bench-calibrate: on the English demo pair, the confidence head's held-out ECE before and
## after `dspark calibrate`, greedy and sampled, on the built-in prompts and on the 200 of
## testdata/calibration-prompts.txt (about five minutes).
bench-calibrate:
	$(GO) test -run '^$$' -bench '^BenchmarkCalibrate$$' -benchtime 1x -count 1 -timeout 30m ./cmd/dspark

## bench-llamacpp: target decode side by side with llama.cpp's CPU backend on the same GGUF, in
## one run, with the same-run streaming read (needs node and npm: installs the npm package
## node-llama-cpp outside the repository on first use; never part of test or CI).
## GGUF=path benchmarks that file instead of the small preset; ARGS=--dense its dense variant.
bench-llamacpp: build
	DSPARK_BIN=$(BIN) ./scripts/bench-llamacpp.sh $(ARGS) $(GGUF)

## k3-full: full-size synthetic K3 DSpark draft -> GGUF -> inspect --check (72 tensors).
k3-full: build
	./scripts/k3-full.sh $(BIN)

## demo-assets: rebuild the embedded demo pair (internal/demo/assets) from its recipe.
demo-assets:
	$(GO) run ./internal/demo/gendemo

## vet-cross: build and vet every package (tests included) for the five supported targets,
## without cgo.
CROSS_TARGETS := linux/amd64 linux/arm64 darwin/arm64 darwin/amd64 windows/amd64
vet-cross:
	@for t in $(CROSS_TARGETS); do \
		echo "vet $$t"; \
		GOOS=$${t%/*} GOARCH=$${t#*/} CGO_ENABLED=0 $(GO) vet $(PKGS) || exit 1; \
	done

## test-cross: vet-cross, then under emulation: linux/arm64 under qemu-user (Debian qemu-user)
## and windows/amd64 under Wine (Debian wine64, plus gcc-mingw-w64-x86-64-win32 for the one DLL
## Go needs that Debian 12's Wine lacks: scripts/wine.sh), where they are installed; then the
## README tour and run --quick on both, compared with a native run (scripts/cross-tokens.sh).
## docs/platforms.md says what runs where and why.
# The emulated lists are explicit: under qemu the kernels and the runtime (runtime/...) and the
# OS-facing packages; under Wine the OS-facing packages, the file formats and the kernels. The
# rest of the suite is the native `make test`. Emulated tests get a 30-minute package timeout
# (under qemu runtime/kimik3 took 486 s of go test's default 600).
CROSS_QEMU_PKGS := ./internal/mmap ./internal/cpuclock ./internal/quantize ./runtime/...
CROSS_WINE_PKGS := ./internal/mmap ./internal/cpuclock ./internal/atomicfile ./internal/outpath \
	./internal/testdir ./gguf/... ./safetensors ./tokenizer ./runtime/kernels ./runtime/speculative
# WINE: the runner for Windows binaries (default scripts/wine.sh when wine64 and mingw-w64 are
# installed; WINE=none skips Windows).
HAVE_WINE := $(shell { command -v wine64 || test -x /usr/lib/wine/wine64; } >/dev/null 2>&1 && command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 && echo yes)
WINE ?= $(if $(HAVE_WINE),$(CURDIR)/scripts/wine.sh,none)
test-cross: vet-cross
	@if command -v qemu-aarch64 >/dev/null; then \
		echo "test linux/arm64 under qemu-aarch64"; \
		GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m -exec qemu-aarch64 $(CROSS_QEMU_PKGS) || exit 1; \
		echo "the README tour and run --quick under qemu-aarch64 vs natively"; \
		scripts/cross-tokens.sh linux/arm64 || exit 1; \
	else echo "qemu-aarch64 not installed: linux/arm64 tests not run"; fi
	@if [ "$(WINE)" != none ]; then \
		echo "test windows/amd64 under $(WINE)"; \
		GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m -exec "$(WINE)" $(CROSS_WINE_PKGS) || exit 1; \
		echo "the README tour and run --quick under Wine vs natively"; \
		EXEC="$(WINE)" scripts/cross-tokens.sh windows/amd64 || exit 1; \
	else echo "wine64 or mingw-w64 not installed: windows/amd64 vetted only (docs/platforms.md)"; fi

## dist: static binaries (no cgo) for the five targets in dist/, with the version and commit
## that `dspark --version` shows (VERSION=... to set the version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)
dist:
	@mkdir -p dist
	@for t in $(CROSS_TARGETS); do \
		os=$${t%/*}; arch=$${t#*/}; ext=; [ $$os = windows ] && ext=.exe; \
		out=dist/dspark-$$os-$$arch$$ext; echo "$$out"; \
		GOOS=$$os GOARCH=$$arch CGO_ENABLED=0 $(GO) build -trimpath \
			-ldflags "-s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o $$out ./cmd/dspark || exit 1; \
	done

clean:
	rm -rf bin dist

## check-nofma: internal/quantize must compile to no fused multiply-add on the architectures
## where Go fuses a*b+c (arm64, ppc64le, s390x, riscv64): its bytes are llama-quantize's only
## with every float32 product rounded on its own (spec quants.md §3). A missing float32(...)
## shows up here as an F(N)MADD/F(N)MSUB in the compiler's assembly listing.
check-nofma:
	@for a in arm64 ppc64le s390x riscv64; do \
		n=$$(GOOS=linux GOARCH=$$a CGO_ENABLED=0 $(GO) build -a -gcflags=-S ./internal/quantize/ 2>&1 | grep -cE '\bFN?M(ADD|SUB)[SD]?\b'); \
		echo "internal/quantize on linux/$$a: $$n fused multiply-adds"; \
		[ "$$n" = 0 ] || exit 1; \
	done
