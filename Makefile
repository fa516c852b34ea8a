# farro: build, test and demo entry points.
#
#   make build   the four binaries into bin/
#   make test    gofmt check, go vet, go test -race, systemd unit checks (CI runs this)
#   make demo    daemons on ./spool and a demo batch of jobs (scripts/demo.sh)
#   make clean   remove build, demo-log and coverage output (the spool is left alone)

GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/farro-dev/farro/internal/daemon.Version=$(VERSION)

# Go files to format-check: everything except the spool (which may hold a
# large queue), build output and git's own directory.
GOFILES_CMD := find . \( -path ./spool -o -path ./bin -o -path ./.git \) -prune -o -name '*.go' -type f -print0

.PHONY: all build test fmt-check vet gotest verify-units demo clean
# The steps of test must run in this order, even under make -j.
.NOTPARALLEL:

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

test: fmt-check vet gotest verify-units

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
# well under a minute), so that CI stays far below its 30 minutes.
gotest:
	$(GO) test -race -count=1 -timeout 5m ./...

verify-units:
	./deploy/verify-units.sh

demo: build
	bash scripts/demo.sh

clean:
	rm -rf $(BIN) demo-logs coverage.out coverage.html *.coverprofile
