# hcp-lua — build, test and install.
#
#   make            build into build/ (runs from the checkout, no install needed)
#   make deps       install missing Debian packages (root), or print the command
#   make demo       deps + build + one real sandboxed pack call
#   make test       deps + build + the C path tests, luacheck, every spec (busted)
#   make mcp-clients  the MCP clients the specs drive hcp mcp with, into build/mcp-clients
#   make check      the C tests and every spec against an ASan+UBSan build
#   make valgrind   the C tests and a sample of the specs under valgrind memcheck
#   make fuzz       the libFuzzer targets of spec/fuzz/, FUZZ_SECONDS each
#   make bench      every performance figure against its reference, in one run
#   make install    PREFIX=/usr/local: commands, Lua modules, C module, man pages,
#                   bash and zsh completion, docs/ in PREFIX/share/doc/hcp-lua
#   luarocks make   the library alone (modules + hcp.core) as a rock: hcp-lua-*.rockspec

PREFIX    ?= /usr/local
DESTDIR   ?=
LUA       ?= lua5.4
LUA_VER   := 5.4
BUILD     ?= build
# where make install puts README.md and docs/ (hcp --help points there)
DOCDIR    ?= $(PREFIX)/share/doc/hcp-lua

# Debian packages the build, the specs and the example packs need.
# lua-argparse: the command-line parser of hcp/hcpx (issue 3), well kept and tiny.
# libreadline-dev: line editing and history for the hcp-lua REPL (its headers at build time; the
#   REPL loads libreadline.so.8 when it starts on a terminal, see src/readline_dl.c).
# jq sqlite3 bc libxml2-utils git qrencode: the bins of packs-examples/ (jq is the demo).
# bubblewrap: the bwrap driver (§10.6), a container tool we trust rather than rewrite.
# procps (pgrep) and groff-base: the specs check for leftover processes and render the man pages.
# lua-luv and lua-cqueues: the event loops the call-handle specs drive rt:pollfd() from (the
# recipes docs/lua-api.md shows); both are built for Lua 5.4 by Debian.
# curl openssl python3: the egress specs and bench (issue 14) drive curl and git through the proxy
# against loopback HTTP/HTTPS servers (python3's http.server, a certificate made with openssl).
# luarocks: the packaging spec builds the rockspec into a temporary tree, as a LuaRocks user would.
# zsh: the completion spec loads the generated zsh completion (bash is there already).
# python3: drives the REPL through a pseudo-terminal (spec/hcp_lua_spec.lua).
# man-db: `man hcp` after make install.
# nodejs (and npm, a package of its own unless the nodejs build bundles it): the official MCP
# clients (TypeScript SDK, inspector CLI) that spec/mcp_spec.lua drives hcp mcp with, installed by
# `make mcp-clients` at the versions spec/mcp/package-lock.json pins.
DEB_PKGS := lua5.4 liblua5.4-dev lua-busted lua-argparse lua-check \
            libreadline-dev gcc make pkg-config \
            jq sqlite3 bc libxml2-utils git qrencode bubblewrap \
            procps groff-base lua-luv lua-cqueues \
            luarocks zsh nodejs curl openssl python3 man-db file iproute2
# make deps: where apt keeps its package lists, the apt-get to run, and the
# sudo a user who is not root is told to use (empty: `su -c` instead).
APT_LISTS ?= /var/lib/apt/lists
APT_GET   ?= apt-get
SUDO      ?= $(shell command -v sudo 2>/dev/null)

LUA_CFLAGS := $(shell pkg-config --cflags lua$(LUA_VER) 2>/dev/null || echo -I/usr/include/lua$(LUA_VER))
ifdef LUA_INCDIR
LUA_CFLAGS := -I$(LUA_INCDIR)
endif
LUA_LIBS   := $(shell pkg-config --libs lua$(LUA_VER) 2>/dev/null || echo -llua$(LUA_VER))
# hcp-lua holds the Lua library itself where liblua5.4-dev installed its
# archive: no shared liblua to map and relocate, and no lazy binding of the
# ~150 lua_* functions the core calls, at every start (~0.15 ms of each
# hcp-lua start, ~0.28 ms of each hcp run here). All of it (whole-archive),
# exported (-rdynamic): a C module a script requires finds the whole API in
# the executable, as it would in liblua (Debian's are not linked to it).
LUA_ARCHIVE := $(wildcard $(shell pkg-config --variable=libdir lua$(LUA_VER) 2>/dev/null)/liblua$(LUA_VER).a)
LUA_WHOLE := -Wl,--whole-archive $(LUA_ARCHIVE) -Wl,--no-whole-archive -lm -ldl
HCP_LUA_LIBS := $(if $(LUA_ARCHIVE),$(LUA_WHOLE),$(LUA_LIBS))

WARN   := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
          -Wpointer-arith -Wformat=2 -Wundef -Werror
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(LUA_CFLAGS) -fPIC
# readline is not linked: the REPL loads it (src/readline_dl.c)
LDLIBS := $(LUA_LIBS)

CORE_SRC := $(filter-out src/hcp_lua.c src/repl.c src/readline_dl.c src/luac_cache.c src/luac_trim.c src/heap.c,$(wildcard src/*.c))
CORE_OBJ := $(CORE_SRC:src/%.c=$(BUILD)/obj/%.o)
HDRS     := $(wildcard src/*.h)
LUA_MODULES := $(shell cd lua && find hcp -name '*.lua' | sort)

CORE_SO  := $(BUILD)/lib/lua/$(LUA_VER)/hcp/core.so
# The spawn helper (src/helper/): what an isolated child execs first, so no
# fork copies the runtime. Static, without libc; x86_64 only (elsewhere the
# core forks as before). Installed in libexec/ and beside core.so.
HELPER_SRC := src/helper/hcp_spawn.c src/helper/nolibc.c src/spawn_child.c src/isolation_child.c \
              src/rootfs_build.c src/pathutil.c src/plan.c src/egress_child.c
HELPER_CFLAGS := -std=c11 -D_GNU_SOURCE -DHCP_HELPER $(WARN) -O2 -g -fno-stack-protector -fno-pie \
                 -fno-builtin -fno-tree-loop-distribute-patterns -fno-asynchronous-unwind-tables $(LUA_CFLAGS)
ifeq ($(shell uname -m),x86_64)
HELPER   := $(BUILD)/libexec/hcp-spawn
HELPER_SO := $(dir $(CORE_SO))hcp-spawn
endif
HCP_LUA  := $(BUILD)/bin/hcp-lua
LUA_LINK := $(BUILD)/share/lua/$(LUA_VER)/hcp
C_TESTS  := $(BUILD)/test/test_paths

MCP_CLIENTS := $(BUILD)/mcp-clients

.PHONY: rock rock-install all deps demo test check valgrind fuzz bench install uninstall clean lint completion \
        mcp-clients build-deps

all: $(CORE_SO) $(HCP_LUA) $(BUILD)/bin/hcp $(BUILD)/bin/hcpx $(LUA_LINK) $(C_TESTS) $(HELPER) $(HELPER_SO)

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

$(BUILD)/obj $(BUILD)/bin $(BUILD)/test $(BUILD)/libexec $(dir $(CORE_SO)) $(dir $(LUA_LINK)):
	mkdir -p $@

# Never built with the sanitizers of `make check` (they need a libc).
ifdef HELPER
$(HELPER): $(HELPER_SRC) $(HDRS) | $(BUILD)/libexec
	$(CC) $(HELPER_CFLAGS) -static -nostdlib -no-pie -o $@ $(HELPER_SRC) -lgcc

$(HELPER_SO): $(HELPER) | $(dir $(CORE_SO))
	cp $(HELPER) $@
endif

$(CORE_SO): $(CORE_OBJ) | $(dir $(CORE_SO))
	$(CC) $(ALL_CFLAGS) -shared -o $@ $(CORE_OBJ) $(LDFLAGS)

# hcp-lua embeds the core (preloaded as hcp.core); hcp and hcpx are links to
# it that it dispatches on by argv[0].
$(HCP_LUA): $(BUILD)/obj/hcp_lua.o $(BUILD)/obj/repl.o $(BUILD)/obj/readline_dl.o $(BUILD)/obj/luac_cache.o $(BUILD)/obj/luac_trim.o $(BUILD)/obj/heap.o $(CORE_OBJ) | $(BUILD)/bin
	$(CC) $(ALL_CFLAGS) -rdynamic -o $@ $^ $(LDFLAGS) $(HCP_LUA_LIBS)

$(BUILD)/bin/hcp $(BUILD)/bin/hcpx: | $(BUILD)/bin
	ln -sf hcp-lua $@

# From the checkout, the Lua modules are a link to lua/hcp, so edits need no rebuild.
$(LUA_LINK): | $(dir $(LUA_LINK))
	ln -sfn $(CURDIR)/lua/hcp $@

$(C_TESTS): spec/c/test_paths.c $(CORE_OBJ) $(BUILD)/obj/luac_trim.o | $(BUILD)/test
	$(CC) $(ALL_CFLAGS) -Isrc -o $@ $^ $(LDFLAGS) $(LDLIBS)

# Shell completion for hcp and hcpx, generated from the argparse definition
# of the commands (`hcp completion SHELL`), so it cannot drift from --help.
# ASAN_OPTIONS: under make check the generator is the ASan build.
BASH_COMPLETION := $(BUILD)/share/bash-completion/completions/hcp
ZSH_COMPLETION  := $(BUILD)/share/zsh/site-functions/_hcp

all: completion
completion: $(BASH_COMPLETION) $(ZSH_COMPLETION)

$(BASH_COMPLETION) $(ZSH_COMPLETION): lua/hcp/cli.lua lua/hcp/init.lua $(HCP_LUA) | $(BUILD)/bin/hcp $(LUA_LINK)
	@mkdir -p $(dir $@)
	ASAN_OPTIONS=detect_leaks=0 $(BUILD)/bin/hcp completion $(if $(filter %/_hcp,$@),zsh,bash) > $@.tmp
	@mv $@.tmp $@

# As root: apt-get update first when apt has no package lists (a fresh
# image), again if the install fails (stale lists), and no recommends.
# Otherwise: the one command that works, for sudo or for su.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
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

# The MCP clients (npm registry, pinned by the committed lockfile) in build/, never
# system-wide. Without node or npm the specs that need them are pending, and say so.
mcp-clients: deps
	@if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
	  echo "mcp-clients: node or npm is missing; the MCP client specs will be pending"; \
	elif [ -f $(MCP_CLIENTS)/.stamp ] && cmp -s spec/mcp/package-lock.json $(MCP_CLIENTS)/package-lock.json; then \
	  echo "mcp-clients: installed"; \
	else \
	  mkdir -p $(MCP_CLIENTS) && cp spec/mcp/package.json spec/mcp/package-lock.json $(MCP_CLIENTS)/ && \
	  npm ci --prefix $(MCP_CLIENTS) --no-audit --no-fund --loglevel=error && touch $(MCP_CLIENTS)/.stamp; \
	fi

# The demo prints the very command it runs; pasted in the checkout, it works.
DEMO_CMD := $(BUILD)/bin/hcp run --json --pack-dir packs-examples jq -nc "{sandbox: env.HCP_SANDBOX, sum: (1+2)}"

demo: deps all
	@echo '$$ $(DEMO_CMD)'
	@$(DEMO_CMD)

# Every spec finds the build under test through HCP_BUILD (spec/support.lua).
test: deps all mcp-clients
	@$(C_TESTS)
	@luacheck -q lua spec bench
	HCP_BUILD=$(BUILD) busted --lua=$(LUA) --cpath='$(BUILD)/lib/lua/$(LUA_VER)/?.so' $(BUSTED_ARGS)

# ASan+UBSan: a separate build whose hcp-lua (a lua.c-compatible interpreter)
# runs busted itself, so every spec exercises the instrumented core; specs
# that start hcp, hcp-lua or a second Lua get the sanitized ones too.
ASAN_BUILD := build-asan
SAN_FLAGS  := -fsanitize=address,undefined
check: deps mcp-clients
	$(MAKE) BUILD=$(ASAN_BUILD) CFLAGS="-O1 -g $(SAN_FLAGS) -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	  LDFLAGS="$(SAN_FLAGS)" all
	$(ASAN_BUILD)/test/test_paths
	ASAN_OPTIONS=detect_leaks=0 HCP_BUILD=$(ASAN_BUILD) HCP_SPEC_LUA=$(CURDIR)/$(ASAN_BUILD)/bin/hcp-lua \
	  HCP_SPEC_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	  busted --lua=$(CURDIR)/$(ASAN_BUILD)/bin/hcp-lua $(BUSTED_ARGS)

# valgrind memcheck, zero errors: the C tests, then a sample of the specs run
# by build/bin/hcp-lua under valgrind (the busted process itself: the core's
# bindings, spawn and path code in-process, and the C JSON decoder on the
# json_c spec's hostile texts; children are not traced).
# Not in the sample: specs whose calls apply the limits layer or probe the
# isolation layers, as valgrind refuses to lower RLIMIT_NOFILE's hard limit
# and cannot run a forked child under seccomp. Filtered out: two specs of
# what valgrind 3.19 emulates differently (no openat2, so the realpath
# fallback answers; execveat re-opened by path, so #! sees the path).
# spec/valgrind/memcheck has the options; hcp.supp valgrind's own false
# positives, each with its reason.
VALGRIND_SPECS ?= spec/core_paths_spec.lua spec/core_spawn_spec.lua spec/hcp_lua_spec.lua spec/json_c_spec.lua
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
FUZZ_TARGETS := paths plan manifest envelope json http
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

$(FUZZ_BUILD)/fuzz/http: spec/fuzz/http.c $(FUZZ_OBJ) $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ spec/fuzz/http.c $(FUZZ_OBJ) $(LUA_LIBS)

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

# make bench: every figure of issue 12 with its reference, measured in one
# run (docs/performance.md says how to read it). HCP_BENCH_N: calls per case
# and cadence (default 300).
bench: deps all
	$(CC) -O2 -o $(BUILD)/bench_sampler bench/sampler.c
	$(CC) -O2 -o $(BUILD)/bench_spawn_parallel bench/spawn_parallel.c
	$(CC) -O2 -o $(BUILD)/bench_capture bench/capture.c
	$(CC) -O2 -o $(BUILD)/bench_floors bench/floors.c
	$(if $(HELPER),$(CC) $(HELPER_CFLAGS) -static -nostdlib -no-pie -o $(BUILD)/bench_forker bench/forker.c src/helper/nolibc.c -lgcc)
	$(HCP_LUA) bench/latency.lua $(BUILD)
	$(HCP_LUA) bench/inflight_bench.lua $(BUILD)/bench_spawn_parallel
	$(HCP_LUA) bench/capture.lua $(BUILD)
	$(HCP_LUA) bench/cli.lua $(BUILD)
	$(HCP_LUA) bench/techniques.lua $(BUILD)
	$(HCP_LUA) bench/floors.lua $(BUILD)
	$(HCP_LUA) bench/egress_bench.lua

# LuaRocks (build.type = "make" in the rockspec): the library alone — every
# Lua module and hcp.core, no readline — into the directories LuaRocks gives.
rock: $(CORE_SO) $(HELPER)

rock-install: $(CORE_SO) $(HELPER)
	@test -n "$(INST_LUADIR)" && test -n "$(INST_LIBDIR)" || { echo "rock-install: INST_LUADIR and INST_LIBDIR are required"; exit 2; }
	for f in $(LUA_MODULES); do install -D -m 0644 lua/$$f $(INST_LUADIR)/$$f || exit 1; done
	install -D -m 0755 $(CORE_SO) $(INST_LIBDIR)/hcp/core.so
	$(if $(HELPER),install -D -m 0755 $(HELPER) $(INST_LIBDIR)/hcp/hcp-spawn)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VER)/hcp \
	  $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VER)/hcp $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(HCP_LUA) $(DESTDIR)$(PREFIX)/bin/hcp-lua
	ln -sf hcp-lua $(DESTDIR)$(PREFIX)/bin/hcp
	ln -sf hcp-lua $(DESTDIR)$(PREFIX)/bin/hcpx
	for f in $(LUA_MODULES); do \
	  install -D -m 0644 lua/$$f $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VER)/$$f || exit 1; \
	done
	install -m 0755 $(CORE_SO) $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VER)/hcp/core.so
	$(if $(HELPER),install -D -m 0755 $(HELPER) $(DESTDIR)$(PREFIX)/libexec/hcp-spawn)
	for m in docs/man/*.1; do [ -f "$$m" ] && install -m 0644 "$$m" $(DESTDIR)$(PREFIX)/share/man/man1/ || true; done
	install -d $(DESTDIR)$(DOCDIR)/spec
	install -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/
	install -m 0644 docs/spec/*.md $(DESTDIR)$(DOCDIR)/spec/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 0644 $(BASH_COMPLETION) $(DESTDIR)$(PREFIX)/share/bash-completion/completions/hcp
	ln -sf hcp $(DESTDIR)$(PREFIX)/share/bash-completion/completions/hcpx
	install -m 0644 $(ZSH_COMPLETION) $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_hcp

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/hcp-lua $(DESTDIR)$(PREFIX)/bin/hcp $(DESTDIR)$(PREFIX)/bin/hcpx
	rm -rf $(DESTDIR)$(PREFIX)/share/lua/$(LUA_VER)/hcp $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_VER)/hcp
	rm -f $(DESTDIR)$(PREFIX)/libexec/hcp-spawn
	rm -f $(DESTDIR)$(PREFIX)/share/man/man1/hcp.1 $(DESTDIR)$(PREFIX)/share/man/man1/hcp-lua.1
	rm -f $(DESTDIR)$(PREFIX)/share/bash-completion/completions/hcp $(DESTDIR)$(PREFIX)/share/bash-completion/completions/hcpx
	rm -f $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_hcp
	rm -rf $(DESTDIR)$(DOCDIR)

# src/*.o and hcp/core.so: what `luarocks make` leaves in the checkout.
clean:
	rm -rf build build-asan build-fuzz
