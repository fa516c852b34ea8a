# farro: build, test and demo entry points.
#
#   make build   the four binaries into bin/
#   make test    gofmt check, go vet, go test -race, the bench harness's own tests, systemd unit checks, Debian package check (CI runs this)
#   make demo    daemons on ./spool and a demo batch of jobs (scripts/demo.sh)
#   make crawl-demo  crawl a generated site served on 127.0.0.1 (scripts/crawl-demo.sh)
#   make deb     the Debian package, dist/farro_<version>_<arch>.deb (deploy/deb/)
#   make check-deb  build the package and check it (deploy/check-deb.sh)
#   make clean   remove build, demo-log and coverage output (the spool is left alone)

GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/farro-dev/farro/internal/daemon.Version=$(VERSION)

# urfave_cli_no_docs leaves out urfave/cli's Markdown and man page writers:
# farro does not use them (internal/daemon writes the man pages), and the
# Markdown library they link fills its tables at every start of every
# program, farroctl --version included (docs/ARCHITECTURE.md, Decisions).
# Exported, so that every go command run by make (build, vet, test, the
# Debian package, the benchmarks) builds alike.
export GOFLAGS := $(strip $(GOFLAGS) -tags=urfave_cli_no_docs)

# Go files to format-check: everything except the spool (which may hold a
# large queue), build output and git's own directory.
GOFILES_CMD := find . \( -path ./spool -o -path ./bin -o -path ./.git \) -prune -o -name '*.go' -type f -print0

.PHONY: all build test fmt-check vet gotest bench-test verify-units demo crawl-demo clean deb check-deb check-deb-fast
# The steps of test must run in this order, even under make -j.
.NOTPARALLEL:

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

test: fmt-check vet gotest bench-test verify-units check-deb-fast

fmt-check:
	@echo '==> gofmt -l (every .go file must be gofmt-formatted)'
	@out=$$($(GOFILES_CMD) | xargs -0 -r gofmt -l); \
	if [ -n "$$out" ]; then \
		echo "These files are not gofmt-formatted (fix with: gofmt -w FILE):"; \
		echo "$$out"; \
		exit 1; \
	fi

vet:
	$(GO) vet ./...

# -timeout bounds a hung test binary (the slowest package, test/crash, takes
# several minutes under -race), so that CI stays far below its 30 minutes.
gotest:
	$(GO) test -race -count=1 -timeout 20m ./...

# The benchmark harness's own tests (bench/ is its own module: peers'
# settings, goal verdicts, the report); its figures are make bench.
bench-test:
	cd bench && $(GO) vet -mod=mod ./... && $(GO) test -mod=mod -race -count=1 ./...

verify-units:
	./deploy/verify-units.sh

# The Debian package. deb is the release build (PIE, trimmed paths, xz);
# check-deb checks it fully; check-deb-fast (in make test) checks a package
# built with the test's build cache in seconds: same files, same scripts.
# As root, CHROOT=/path/to/debootstrap-root also installs it there.
deb:
	./deploy/deb/build-deb.sh dist

check-deb:
	./deploy/check-deb.sh $(if $(CHROOT),--chroot $(CHROOT))

check-deb-fast:
	./deploy/check-deb.sh --fast

demo: build
	bash scripts/demo.sh

crawl-demo:
	bash scripts/crawl-demo.sh

clean:
	rm -rf $(BIN) dist demo-logs coverage.out coverage.html *.coverprofile

# Benchmarks: bench/ is its own Go module (River's and asynq's dependencies
# never enter farro's go.mod); -mod=mod lets it follow farro's dependencies
# as they change. What each figure means: bench/README.md.
#   make bench        full run, as root: farro vs River (PostgreSQL) and asynq
#                     (Redis, both installed from Debian's packages if missing)
#                     vs the filesystem floor, on the root fs and a loop-mounted
#                     journaled ext4, then the crawl benchmark and the
#                     frontier at scale (about 27 minutes)
#   make bench-smoke  farro (spool and PostgreSQL) and the floor, small N, about a minute (CI)
#   make bench-crawl  the crawl benchmark (part of make bench): farro's crawl
#                     frontier vs Colly vs wget --recursive on a 10,000-page
#                     site served by a private nginx (nginx-light and wget
#                     installed from Debian's packages if missing; about 10
#                     minutes, more while farro is slow)
#   make bench-crawl-smoke  the same on 300 pages, one run: under a minute
#   make bench-scale  the scale section alone at 1k and 1M queued jobs (the
#                     1M goals; make bench stops at 100k): 4 M inodes twice,
#                     about an hour and 35 GB of disk
.PHONY: bench bench-smoke bench-crawl bench-crawl-smoke bench-scale
bench:
	cd bench && $(GO) run -mod=mod ./cmd/bench -mode full
	cd bench && $(GO) run -mod=mod ./cmd/crawlbench -mode full
	cd bench && $(GO) run -mod=mod ./cmd/frontierscale

bench-scale:
	cd bench && $(GO) run -mod=mod ./cmd/bench -mode full -only scale -scale 1000,1000000 -journal no -peers no

bench-crawl:
	cd bench && $(GO) run -mod=mod ./cmd/crawlbench -mode full

bench-crawl-smoke:
	cd bench && $(GO) run -mod=mod ./cmd/crawlbench -mode smoke

# make bench-frontier: managerd on a generated crawl of 100k domains and 1M
# URLs (RSS, CPU while it releases; medians of 3, then one run measured once
# its start-up work is done; the two goals; about 5 minutes; part of make bench).
.PHONY: bench-frontier
bench-frontier:
	cd bench && $(GO) run -mod=mod ./cmd/frontierscale

bench-smoke:
	cd bench && $(GO) run -mod=mod ./cmd/bench -mode smoke

# The long crash-simulation run (test/crash, docs/RELIABILITY.md): the kill
# storm until >= 1,000 kills and 10,000 jobs, the power-loss enumeration at
# full bound, and every crash point. The full log goes to
# $TMPDIR/farro-crash-long.log; the one-line summary is printed last.
.PHONY: crash-long
crash-long:
	@log=$${TMPDIR:-/tmp}/farro-crash-long.log; sum=$${TMPDIR:-/tmp}/farro-crash-long-summary.txt; rc=0; \
	echo "==> go test ./test/crash/... in long mode (log: $$log)"; \
	FARRO_CRASH_LONG=1 FARRO_CRASH_SUMMARY=$$sum $(GO) test -count=1 -timeout 120m -v ./test/crash/... >$$log 2>&1 || rc=$$?; \
	grep -E '^(--- |ok|FAIL)|_test.go:[0-9]+: (kill storm|crash points|power|violation)' $$log; \
	cat $$sum 2>/dev/null; exit $$rc
