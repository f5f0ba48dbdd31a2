# tcpwheel: a userspace TCP/IP stack whose every TCP timer runs on a hashed timing wheel.
# sudo may drop /usr/local/go/bin from PATH: fall back to it, and put go's
# directory first on PATH for every recipe (staticcheck runs `go list`).
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
export PATH := $(patsubst %/,%,$(dir $(GO))):$(PATH)
GOFMT   ?= $(shell $(GO) env GOROOT)/bin/gofmt
# The toolchain: go.work and cmd/tcpwheel/go.mod name the Go patch release the
# project builds with (their toolchain line: the first without the standard
# library vulnerabilities govulncheck finds reachable from our code); auto lets
# an older local go fetch it through the module proxy, where a go.env that says
# local would ignore the line.
export GOTOOLCHAIN ?= auto
BENCHTIME ?= 1s
BENCHCOUNT ?= 1

# staticcheck, pinned: installed with `go install` (through the module proxy)
# into the first GOPATH's bin when that holds no staticcheck of this version.
STATICCHECK_VERSION ?= 0.8.2
TOOLBIN     ?= $(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin
STATICCHECK ?= $(TOOLBIN)/staticcheck

# Two modules, one workspace (go.work): the library at the root, and the
# tcpwheel tool in cmd/tcpwheel (its own module: it holds the gVisor baseline,
# so that the library does not depend on gVisor). In workspace mode ./... means
# the root module's packages only, so every target names both.
PKGS := ./... ./cmd/tcpwheel/...

.PHONY: all build test lint vulncheck vet fmt fmt-check staticcheck bench fuzz run forward deps run-deps packetdrill packetdrill-shim conformance conformance-reference

all: build

# Compiles every package and writes the CLI to ./bin/tcpwheel.
build:
	$(GO) build $(PKGS)
	$(GO) build -o bin/tcpwheel ./cmd/tcpwheel

# Installs what the tests need (tcpdump, iproute2, ...) when missing;
# run-deps what `make run` and the commands it suggests need (CA certificates
# for the module proxy, curl, ping, nc, dig). Debian packages, as root.
deps:
	@scripts/deps.sh

run-deps:
	@scripts/deps.sh run

fmt:
	$(GOFMT) -w $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')

fmt-check:
	@out=$$($(GOFMT) -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	@$(STATICCHECK) -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION))' || { \
		echo "installing staticcheck $(STATICCHECK_VERSION) into $(TOOLBIN)"; \
		GOBIN=$(TOOLBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@v$(STATICCHECK_VERSION); }
	$(STATICCHECK) $(PKGS)

# gofmt check, go vet and staticcheck: each must print nothing.
lint: fmt-check vet staticcheck

# govulncheck over both modules against a pinned snapshot of the Go
# vulnerability database (scripts/vulncheck.sh): nothing may be reachable.
vulncheck:
	GO=$(GO) scripts/vulncheck.sh

# The README's test command. Integration tests need root and /dev/net/tun; with
# CI=true they fail instead of skipping when those are missing.
test: deps lint vulncheck
	$(GO) test -race -count=1 -timeout 30m $(PKGS)
	# tcp's packet tables again with TSO segments on (tcp.Config.GSOMax):
	# they must see the same packets.
	$(GO) test -count=1 ./tcp/ -args -tcp.gsomax=65435
	# The loop package's tests on parked and unlocked loops (loop.NewParked,
	# NewUnlocked; stack.Config.LoopThread's default unlocks the loops with
	# a P to spare, which the runs above use), and the stack's and the
	# kernel interop tests with one P (GOMAXPROCS=1), where it parks them.
	$(GO) test -count=1 ./loop/ -args -loop.thread=parked
	$(GO) test -count=1 ./loop/ -args -loop.thread=unlocked
	GOMAXPROCS=1 $(GO) test -count=1 ./stack/... ./integration/

# Benchmarks: the wheel against time.AfterFunc, time.Timer.Reset (timer/) and
# gVisor's clock (cmd/tcpwheel/internal/tcpipclock/: the library does not import
# gVisor), and the event loop's firing lateness (loop/), in one run so the
# ratios are comparable.
bench:
	$(GO) test -run '^$$' -bench 'StartStop|Advance|Expire|Lateness' -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./timer/ ./cmd/tcpwheel/internal/tcpipclock/ ./loop/

# Longer fuzzing sessions, FUZZTIME each: the wheel against its reference
# model, the virtio-net header parser and the segmentation of offload frames,
# the stack's input path (IPv4, TCP, UDP, ICMP) with arbitrary packets,
# a Conn's Writes against Closes, CloseWrites and resets (FuzzConnWrite),
# run's DNS responder with arbitrary queries, the flight recordings' reader
# on corrupt files, their replay on recordings edited event by event, and the
# checksum, IPv4 header and sequence-number packages that stand in for gVisor's.
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzWheel$$' -fuzztime $(FUZZTIME) ./timer/
	$(GO) test -run '^$$' -fuzz '^FuzzVnetHdr$$' -fuzztime $(FUZZTIME) ./tun/
	$(GO) test -run '^$$' -fuzz '^FuzzInput$$' -fuzztime $(FUZZTIME) ./stack/
	$(GO) test -run '^$$' -fuzz '^FuzzTransportOf$$' -fuzztime $(FUZZTIME) ./stack/
	$(GO) test -run '^$$' -fuzz '^FuzzReassembly$$' -fuzztime $(FUZZTIME) ./stack/
	$(GO) test -run '^$$' -fuzz '^FuzzDeadline$$' -fuzztime $(FUZZTIME) ./stack/
	$(GO) test -run '^$$' -fuzz '^FuzzConnWrite$$' -fuzztime $(FUZZTIME) ./stack/
	# FuzzForward's handlers run on goroutines of their own, which makes its
	# coverage a little flaky: minimising an input then took the whole time.
	$(GO) test -run '^$$' -fuzz '^FuzzForward$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./stack/
	$(GO) test -run '^$$' -fuzz '^FuzzRespond$$' -fuzztime $(FUZZTIME) ./internal/dnsrv/
	$(GO) test -run '^$$' -fuzz '^FuzzVnetPayload$$' -fuzztime $(FUZZTIME) ./cmd/tcpwheel/internal/baseline/gvisor/
	$(GO) test -run '^$$' -fuzz '^FuzzChecksum$$' -fuzztime $(FUZZTIME) ./internal/tcpip/checksum/
	$(GO) test -run '^$$' -fuzz '^FuzzIPv4$$' -fuzztime $(FUZZTIME) ./internal/tcpip/header/
	$(GO) test -run '^$$' -fuzz '^FuzzSeqnum$$' -fuzztime $(FUZZTIME) ./tcp/seqnum/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./stack/record/
	$(GO) test -run '^$$' -fuzz '^FuzzReplayEdits$$' -fuzztime $(FUZZTIME) ./stack/replay/

# The built binary, not `go run` (which exits 1 when its program is
# interrupted). On a terminal, `set -m` runs it as a job of its own that holds
# the terminal, so that Ctrl-C interrupts tcpwheel alone, not make and the
# shell as well (make would report "Interrupt" and die of the signal). tcpwheel
# exits 0 after a SIGINT or SIGTERM it handled; 130 (a SIGINT before its
# handler was installed) counts as a clean stop as well.
run: run-deps build
	@if [ -t 0 ]; then set -m; fi; ./bin/tcpwheel run $(ARGS) || [ $$? -eq 130 ]

# `tcpwheel forward` (issue 16), the same way: two namespaces, the stack
# forwarding every flow from the clients' to kernel sockets in the servers'.
forward: run-deps build
	@if [ -t 0 ]; then set -m; fi; ./bin/tcpwheel forward $(ARGS) || [ $$? -eq 130 ]

# packetdrill conformance (issue 13). packetdrill is built out of tree from the
# source snapshot in ../shared/packetdrill (PACKETDRILL_SRC), into build/; the
# shim is our shared object for its --so_filename mode. `make conformance` runs
# the portable scripts against the stack in virtual time and fails only on a
# regression against conformance/expected.txt or a crash of the shim.
packetdrill: deps
	@scripts/packetdrill.sh

packetdrill-shim:
	$(GO) build -buildmode=c-shared -o build/packetdrill.so ./conformance/shim

conformance: packetdrill packetdrill-shim
	@scripts/conformance.sh $(ARGS)

# Both columns (tcpwheel, and Linux in packetdrill's local mode, each script in
# a fresh network namespace) into integration/results.
conformance-reference: packetdrill packetdrill-shim
	@scripts/conformance.sh --reference --results integration/results/conformance-$$(date -u +%F).txt $(ARGS)
