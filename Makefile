# tcpwheel: a userspace TCP/IP stack whose every TCP timer runs on a hashed timing wheel.
# sudo may drop /usr/local/go/bin from PATH: fall back to it.
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BENCHTIME ?= 1s
BENCHCOUNT ?= 1

.PHONY: all build test vet fmt fmt-check bench fuzz run deps

all: build

build:
	$(GO) build ./...

# Installs what the tests need (tcpdump, iproute2, ...) when missing.
deps:
	@scripts/deps.sh

fmt:
	gofmt -w $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# The README's test command. Integration tests need root and /dev/net/tun; with
# CI=true they fail instead of skipping when those are missing.
test: deps fmt-check vet
	$(GO) test -race -count=1 -timeout 30m ./...

# Benchmarks: the wheel against time.AfterFunc, time.Timer.Reset and gVisor's clock
# (timer/), and the event loop's firing lateness (loop/), in one run so the ratios
# are comparable.
bench:
	$(GO) test -run '^$$' -bench 'StartStop|Advance|Expire|Lateness' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./timer/ ./loop/

# A longer fuzzing session of the wheel against its reference model.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzWheel -fuzztime 60s ./timer/

run: build
	$(GO) run ./cmd/tcpwheel run $(ARGS)
