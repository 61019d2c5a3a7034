# The README's two set-up commands. Both are idempotent and start from a fresh clone.
#   make demo   install missing Debian packages, build, run the main job on a bundled input
#   make test   the same set-up, then the whole test suite
PRESET ?= default
BUILD_DIR := build/$(PRESET)
LOCKSCOPE := $(BUILD_DIR)/cli/lockscope

.PHONY: all deps configure build demo test clean
all: build

deps:
	@scripts/install-deps

configure: deps
	@mkdir -p build && cmake --preset $(PRESET) > build/$(PRESET).configure.log 2>&1 || (cat build/$(PRESET).configure.log; exit 1)

build: configure
	@cmake --build --preset $(PRESET)

demo: build
	@echo "== lockscope resp captures/seed-4.2.resp (the messages of the seed article, §4.2)"
	@$(LOCKSCOPE) resp captures/seed-4.2.resp --max-argument 48 --short-owners

test: build
	@ctest --preset $(PRESET) --parallel 2

clean:
	rm -rf build
