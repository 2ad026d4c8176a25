# hcp-lua — build, test and install.
#
#   make            build into build/ (runs from the checkout, no install needed)
#   make deps       install missing Debian packages (root), or print the command
#   make demo       deps + build + one real sandboxed pack call
#   make test       deps + build + the C path tests, luacheck, every spec (busted)
#   make check      the C tests and every spec against an ASan+UBSan build
#   make valgrind   the C tests and a sample of the specs under valgrind memcheck
#   make fuzz       the libFuzzer targets of spec/fuzz/, FUZZ_SECONDS each
#   make bench      per-call latency against a posix_spawn baseline
#   make install    PREFIX=/usr/local: commands, Lua modules, C module, man pages

PREFIX    ?= /usr/local
DESTDIR   ?=
LUA       ?= lua5.4
LUA_VER   := 5.4
BUILD     ?= build

# Debian packages the build, the specs and the example packs need.
# lua-argparse: the command-line parser of hcp/hcpx (issue 3), well kept and tiny.
# libreadline-dev: line editing and history for the hcp-lua REPL.
# jq sqlite3 bc libxml2-utils git qrencode: the bins of packs-examples/ (jq is the demo).
# bubblewrap: the bwrap driver (§10.6), a container tool we trust rather than rewrite.
# procps (pgrep) and groff-base: the specs check for leftover processes and render the man pages.
# python3: drives the REPL through a pseudo-terminal (spec/hcp_lua_spec.lua).
# man-db: `man hcp` after make install.
DEB_PKGS := lua5.4 liblua5.4-dev lua-cjson lua-busted lua-argparse lua-check \
            libreadline-dev gcc make pkg-config \
            jq sqlite3 bc libxml2-utils git qrencode bubblewrap \
            procps groff-base python3 man-db
# make deps: where apt keeps its package lists, the apt-get to run, and the
# sudo a user who is not root is told to use (empty: `su -c` instead).
APT_LISTS ?= /var/lib/apt/lists
APT_GET   ?= apt-get
SUDO      ?= $(shell command -v sudo 2>/dev/null)

LUA_CFLAGS := $(shell pkg-config --cflags lua$(LUA_VER) 2>/dev/null || echo -I/usr/include/lua$(LUA_VER))
LUA_LIBS   := $(shell pkg-config --libs lua$(LUA_VER) 2>/dev/null || echo -llua$(LUA_VER))

WARN   := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
          -Wpointer-arith -Wformat=2 -Wundef -Werror
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(LUA_CFLAGS) -fPIC
LDLIBS := $(LUA_LIBS) -lreadline

CORE_SRC := $(filter-out src/hcp_lua.c src/repl.c,$(wildcard src/*.c))
CORE_OBJ := $(CORE_SRC:src/%.c=$(BUILD)/obj/%.o)
HDRS     := $(wildcard src/*.h)

CORE_SO  := $(BUILD)/lib/lua/$(LUA_VER)/hcp/core.so
HCP_LUA  := $(BUILD)/bin/hcp-lua
LUA_LINK := $(BUILD)/share/lua/$(LUA_VER)/hcp
C_TESTS  := $(BUILD)/test/test_paths

.PHONY: all deps demo test check valgrind fuzz bench install uninstall clean lint build-deps

all: $(CORE_SO) $(HCP_LUA) $(BUILD)/bin/hcp $(BUILD)/bin/hcpx $(LUA_LINK) $(C_TESTS)

# Before the first compile: the compiler, the Lua and readline headers.
# Missing ones are make deps' business, not a compiler error's.
build-deps:
	@missing=""; \
	command -v $(firstword $(CC)) >/dev/null 2>&1 || missing="$$missing gcc"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	if command -v $(firstword $(CC)) >/dev/null 2>&1; then \
	  printf '#include <lua.h>\n' | $(CC) $(LUA_CFLAGS) -E -x c - >/dev/null 2>&1 || missing="$$missing liblua5.4-dev"; \
	  printf '#include <stdio.h>\n#include <readline/readline.h>\n' | $(CC) -E -x c - >/dev/null 2>&1 \
	    || missing="$$missing libreadline-dev"; \
	fi; \
	if [ -n "$$missing" ]; then \
	  echo "make: cannot build, missing:$$missing" >&2; \
	  echo "make: run make deps (it installs them, or prints the command to run)" >&2; exit 1; \
	fi

$(BUILD)/obj/%.o: src/%.c $(HDRS) | $(BUILD)/obj build-deps
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/obj $(BUILD)/bin $(BUILD)/test $(dir $(CORE_SO)) $(dir $(LUA_LINK)):
	mkdir -p $@

$(CORE_SO): $(CORE_OBJ) | $(dir $(CORE_SO))
	$(CC) $(ALL_CFLAGS) -shared -o $@ $(CORE_OBJ) $(LDFLAGS)

# hcp-lua embeds the core (preloaded as hcp.core); hcp and hcpx are links to
# it that it dispatches on by argv[0].
$(HCP_LUA): $(BUILD)/obj/hcp_lua.o $(BUILD)/obj/repl.o $(CORE_OBJ) | $(BUILD)/bin
	$(CC) $(ALL_CFLAGS) -rdynamic -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/bin/hcp $(BUILD)/bin/hcpx: | $(BUILD)/bin
	ln -sf hcp-lua $@

# From the checkout, the Lua modules are a link to lua/hcp, so edits need no rebuild.
$(LUA_LINK): | $(dir $(LUA_LINK))
	ln -sfn $(CURDIR)/lua/hcp $@

$(C_TESTS): spec/c/test_paths.c $(CORE_OBJ) | $(BUILD)/test
	$(CC) $(ALL_CFLAGS) -Isrc -o $@ $^ $(LDFLAGS) $(LDLIBS)

# As root: apt-get update first when apt has no package lists (a fresh
# image), again if the install fails (stale lists), and no recommends.
# Otherwise: the one command that works, for sudo or for su.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	install="$(APT_GET) install -y --no-install-recommends$$missing"; \
	if [ -z "$$missing" ]; then echo "deps: all Debian packages present"; \
	elif [ "$$(id -u)" = 0 ]; then \
	  echo "deps: installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  if ! ls $(APT_LISTS)/*_Packages* >/dev/null 2>&1; then $(APT_GET) update -qq || exit 1; fi; \
	  $$install -qq || { $(APT_GET) update -qq && $$install -qq; }; \
	else \
	  echo "deps: missing Debian packages:$$missing"; \
	  if [ -n "$(SUDO)" ]; then \
	    echo "deps: run: sudo $(APT_GET) update && sudo $$install"; \
	  else \
	    echo "deps: run: su -c '$(APT_GET) update && $$install'"; \
	  fi; exit 1; \
	fi

# The demo prints the very command it runs; pasted in the checkout, it works.
DEMO_CMD := $(BUILD)/bin/hcp run --json --pack-dir packs-examples jq -nc "{sandbox: env.HCP_SANDBOX, sum: (1+2)}"

demo: deps all
	@echo '$$ $(DEMO_CMD)'
	@$(DEMO_CMD)

# Every spec finds the build under test through HCP_BUILD (spec/support.lua).
test: deps all
	@$(C_TESTS)
	@luacheck -q lua spec bench
	HCP_BUILD=$(BUILD) busted --lua=$(LUA) --cpath='$(BUILD)/lib/lua/$(LUA_VER)/?.so' $(BUSTED_ARGS)

# ASan+UBSan: a separate build whose hcp-lua (a lua.c-compatible interpreter)
# runs busted itself, so every spec exercises the instrumented core; specs
# that start hcp, hcp-lua or a second Lua get the sanitized ones too.
ASAN_BUILD := build-asan
SAN_FLAGS  := -fsanitize=address,undefined
check: deps
	$(MAKE) BUILD=$(ASAN_BUILD) CFLAGS="-O1 -g $(SAN_FLAGS) -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  LDFLAGS="$(SAN_FLAGS)" all
	$(ASAN_BUILD)/test/test_paths
	ASAN_OPTIONS=detect_leaks=0 HCP_BUILD=$(ASAN_BUILD) HCP_SPEC_LUA=$(CURDIR)/$(ASAN_BUILD)/bin/hcp-lua \
	  HCP_SPEC_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	  busted --lua=$(CURDIR)/$(ASAN_BUILD)/bin/hcp-lua $(BUSTED_ARGS)

# valgrind memcheck, zero errors: the C tests, then a sample of the specs run
# by build/bin/hcp-lua under valgrind (the busted process itself: the core's
# bindings, spawn and path code in-process; children are not traced).
# Not in the sample: specs whose calls apply the limits layer or probe the
# isolation layers, as valgrind refuses to lower RLIMIT_NOFILE's hard limit
# and cannot run a forked child under seccomp. Filtered out: two specs of
# what valgrind 3.19 emulates differently (no openat2, so the realpath
# fallback answers; execveat re-opened by path, so #! sees the path).
# spec/valgrind/memcheck has the options; hcp.supp valgrind's own false
# positives, each with its reason.
VALGRIND_SPECS ?= spec/core_paths_spec.lua spec/core_spawn_spec.lua spec/hcp_lua_spec.lua
VALGRIND_SKIP  := --filter-out=refuses.magic.links.with.ELOOP --filter-out=through.the.descriptor.that.was.checked
valgrind: deps all
	@$(MAKE) -s deps DEB_PKGS=valgrind
	spec/valgrind/memcheck $(C_TESTS)
	HCP_BUILD=$(BUILD) busted --lua=$(CURDIR)/spec/valgrind/hcp-lua $(VALGRIND_SKIP) $(VALGRIND_SPECS)

# libFuzzer (clang): one binary per target of spec/fuzz/. paths links the
# sanitized core objects directly; the Lua targets embed Lua 5.4 through
# spec/fuzz/lua_target.c and run spec/fuzz/<target>.lua. Each runs for
# FUZZ_SECONDS on a working corpus in build-fuzz/corpus/<target> seeded by
# the committed spec/fuzz/<target>/ (new inputs are not written there); a
# crash fails make fuzz and leaves its input as build-fuzz/crash-<target>-*:
# fix the code, then add that file to spec/fuzz/<target>/.
FUZZ_BUILD   := build-fuzz
FUZZ_TARGETS := paths plan manifest envelope json
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_OBJ     := $(CORE_SRC:src/%.c=$(FUZZ_BUILD)/obj/%.o)
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz/%)
FUZZ_FLAGS   := -std=c11 -D_GNU_SOURCE $(WARN) -O1 -g $(FUZZ_SAN) $(LUA_CFLAGS) -Isrc

.PHONY: fuzz-build
fuzz-build: build-deps
	@$(MAKE) -s deps DEB_PKGS="clang libclang-rt-dev"
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=$(FUZZ_CC) CFLAGS="-O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link" $(FUZZ_OBJ)
	$(MAKE) $(FUZZ_BINS)

$(FUZZ_BUILD)/fuzz/paths: spec/fuzz/paths.c $(FUZZ_OBJ) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ spec/fuzz/paths.c $(FUZZ_OBJ) $(LUA_LIBS)

$(FUZZ_BUILD)/fuzz/%: spec/fuzz/lua_target.c $(FUZZ_OBJ) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -DHCP_FUZZ_TARGET='"$*"' -DHCP_REPO='"$(CURDIR)"' \
	  -o $@ spec/fuzz/lua_target.c $(FUZZ_OBJ) $(LUA_LIBS)

fuzz: deps fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  if ASAN_OPTIONS=detect_leaks=1 $(FUZZ_BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	      -max_len=4096 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crash-$$t- \
	      $(FUZZ_BUILD)/corpus/$$t spec/fuzz/$$t > $(FUZZ_BUILD)/$$t.log 2>&1; then \
	    echo "fuzz: $$t: $$(sed -n 's/^stat::number_of_executed_units: *//p' $(FUZZ_BUILD)/$$t.log) runs in $(FUZZ_SECONDS) s, no crash"; \
	  else \
	    tail -n 30 $(FUZZ_BUILD)/$$t.log; \
	    echo "fuzz: $$t: CRASH (input: $$(ls $(FUZZ_BUILD)/crash-$$t-* 2>/dev/null | head -n 1); log: $(FUZZ_BUILD)/$$t.log)"; \
	    exit 1; \
	  fi; \
	done

lint:
	luacheck lua spec bench

bench: deps all
	$(CC) -O2 -o $(BUILD)/bench_spawn bench/spawn_baseline.c
	$(HCP_LUA) bench/exec_bench.lua $(BUILD)/bench_spawn

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VER)/hcp \
	  $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VER)/hcp $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(HCP_LUA) $(DESTDIR)$(PREFIX)/bin/hcp-lua
	ln -sf hcp-lua $(DESTDIR)$(PREFIX)/bin/hcp
	ln -sf hcp-lua $(DESTDIR)$(PREFIX)/bin/hcpx
	install -m 0644 lua/hcp/*.lua $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VER)/hcp/
	install -d $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VER)/hcp/driver
	install -m 0644 lua/hcp/driver/*.lua $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VER)/hcp/driver/
	install -m 0755 $(CORE_SO) $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VER)/hcp/core.so
	for m in docs/man/*.1; do [ -f "$$m" ] && install -m 0644 "$$m" $(DESTDIR)$(PREFIX)/share/man/man1/ || true; done

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/hcp-lua $(DESTDIR)$(PREFIX)/bin/hcp $(DESTDIR)$(PREFIX)/bin/hcpx
	rm -rf $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VER)/hcp $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VER)/hcp
	rm -f $(DESTDIR)$(PREFIX)/share/man/man1/hcp.1 $(DESTDIR)$(PREFIX)/share/man/man1/hcp-lua.1

clean:
	rm -rf build build-asan build-fuzz
