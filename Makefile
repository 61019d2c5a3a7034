# The README's two set-up commands. Both are idempotent and start from a fresh clone.
#   make demo   install the missing Debian packages the build needs, build, run the main job on a bundled input
#   make test   the same, plus what only the tests use (servers, clients, tshark, a browser,
#               promtool, the pinned npm packages), then the whole test suite
PRESET ?= default
BUILD_DIR := build/$(PRESET)
LOCKSCOPE := $(BUILD_DIR)/cli/lockscope
# Tests run two per core: about half of a test's time is spent waiting (servers starting,
# leases running out, child processes), so two per core keep the cores busy; on the
# 2-core machine the suite took 97 s this way against 136 s at one per core.
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 2 )))

.PHONY: all deps test-deps configure build demo test bench pgo clean
all: build

deps:
	@scripts/install-deps

# Test-only tools: Debian packages, then the npm packages the browser test pins (into a
# cache under build/; nothing is installed again while its lock file is unchanged).
test-deps:
	@scripts/install-deps --test
	@tests/browser/install.sh > /dev/null

configure: deps
	@mkdir -p build && cmake --preset $(PRESET) > build/$(PRESET).configure.log 2>&1 || (cat build/$(PRESET).configure.log; exit 1)

build: configure
	@cmake --build --preset $(PRESET)

demo: build
	@echo "== lockscope analyze captures/seed-redisson.pcap (the seed article's lock contention, rebuilt as a capture)"
	@$(LOCKSCOPE) analyze captures/seed-redisson.pcap
	@$(LOCKSCOPE) analyze captures/seed-redisson.pcap --format html -o $(BUILD_DIR)/demo-report.html 2>/dev/null
	@echo "== the same as an HTML swimlane report (open it in a browser): $(abspath $(BUILD_DIR)/demo-report.html)"

test: test-deps build
	@ctest --preset $(PRESET) --parallel $(TEST_JOBS) --output-on-failure

# The Google Benchmark suite and the benchmarks' capture generators, in the same tree
# (build/default/bench/...): no test runs them, so `build` and `test` leave them out.
bench: configure
	@cmake --build --preset bench

# A lockscope for a long-running deployment: optimized with a profile of itself at work
# (scripts/pgo-train; about 9 minutes on 2 cores with the build) and link-time optimized; 11-12% less
# CPU per exchange than the default build (README: Building by hand). Not the default:
# it would add those minutes to every `make test`. Trains again on every run.
pgo: deps
	@scripts/pgo-train
	@mkdir -p build && cmake --preset pgo > build/pgo.configure.log 2>&1 || (cat build/pgo.configure.log; exit 1)
	@cmake --build --preset pgo --target lockscope
	@tests/build/check_profile_guided.sh build/pgo build/pgo-profile build/pgo/cli/lockscope
	@echo "== build/pgo/cli/lockscope"

clean:
	rm -rf build
