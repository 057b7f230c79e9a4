# deskenv: `make run` starts the appliance, `make test` runs every test.
# Both install what they need first (scripts/install-deps.sh, shared with the Dockerfile).

GO      ?= go
BIN     := bin/deskenv
ARGS    ?=
NPM_DIRS := e2e/mcp-ts e2e/browser e2e/record
# staticcheck, pinned, fetched through the module proxy on first use.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: run build test fuzz fuzz-short deps deps-test npm vet bench clean image image-test tasks-check tasks-check-fast

run: deps build
	./$(BIN) $(ARGS)

build:
	$(GO) build -o $(BIN) ./cmd/deskenv

deps:
	./scripts/install-deps.sh build runtime

deps-test:
	./scripts/install-deps.sh all

# The browser and TypeScript-SDK tests need their npm packages (no browser download:
# Playwright drives Debian's /usr/bin/chromium).
npm:
	@for d in $(NPM_DIRS); do \
	  if [ -f $$d/package-lock.json ]; then \
	    if [ ! -d $$d/node_modules ] || [ $$d/package-lock.json -nt $$d/node_modules ]; then \
	      echo "npm ci in $$d"; \
	      npm ci --prefix $$d --no-audit --no-fund --loglevel=error || \
	      { echo "npm ci refused the lock file in $$d (optional packages for other platforms it cannot resolve); npm install instead"; \
	        npm install --prefix $$d --no-audit --no-fund --loglevel=error; } || exit 1; \
	    fi; \
	  fi; \
	done

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

test: deps-test npm vet
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) tasks-check-fast

# Prove tasks (deskenv tasks check: the solution scores 1, doing nothing 0).
# make test proves the tasks tagged smoke; CI proves them all on two desktops.
tasks-check-fast: build
	./$(BIN) tasks check --only smoke --seeds 1

tasks-check: build
	./$(BIN) tasks check --desktops 2

# Every go test -fuzz target (the FuzzXxx of each fuzz_test.go) for FUZZTIME
# each, one after the other; `make test` already replays their seed corpora.
# fuzz-short is the few seconds each that CI gives them (docs/FUZZING.md).
FUZZTIME ?= 2m

fuzz: deps-test
	./scripts/fuzz.sh $(FUZZTIME)

fuzz-short: deps-test
	./scripts/fuzz.sh 5s

# The image, both targets of the Dockerfile (full as deskenv:latest, slim as
# deskenv:slim), built with podman as root; stand-in base images when the real
# ones cannot be pulled (scripts/image.sh, docs/DEPLOY.md). image-test runs
# them and checks them from outside (scripts/image-test.sh, e2e/image).
image:
	./scripts/image.sh

image-test: deps-test npm
	./scripts/image-test.sh

bench: deps-test npm build
	$(GO) run ./cmd/deskbench all

clean:
	rm -rf bin
