# v7fill - build, test, demo, bench, fuzz, install.  GNU make only.
#
#   make                 libv7fill.a and the v7fill binary (in $(BUILD)/)
#   make check           unit tests (cmocka) + integration tests (throwaway cluster)
#   make check SAN=1     the same under AddressSanitizer + UndefinedBehaviorSanitizer (alias: make san)
#   make check TEST_JOBS=2  integration tests two at a time, each worker with its own cluster
#   make tsan            the import, stream and switch-back tests under ThreadSanitizer
#   make unit-clang      the unit tests built by clang under ASan + UBSan (clang's UBSan also
#                        flags a zero offset applied to a NULL pointer; gcc's does not)
#   make demo            the main job on the bundled example, in a throwaway cluster
#   make bench           benchmarks, each figure beside its baseline (ends with bench-stream,
#                        then bench-migrate)
#   make bench-stream    v7fill stream beside native logical replication, two throwaway
#                        clusters per server profile [BENCH_PROFILES="tuned production";
#                        BENCH_STREAM_ROWS=1000000, 100000 for a quick run;
#                        BENCH_STREAM_WALSENDER=1|only: the source walsender's CPU by pgoutput option]
#   make bench-migrate   v7fill migrate beside a raw COPY into the same target, the child
#                        fill, the capture's catch-up, a writer's longest wait (one throwaway
#                        cluster) [BENCH_MIGRATE_PARENT=1000000 BENCH_MIGRATE_CHILD=2000000;
#                        BENCH_ROWS_BIG=1: 5M / 10M]
#   make fuzz            libFuzzer targets (clang), FUZZ_SECONDS each
#   make valgrind        unit tests under valgrind memcheck (errors and leaks fail)
#   make install PREFIX=/usr/local [DESTDIR=...]  (binary, man page, SQL helpers, bash completion)
#
# `check` and `demo` first run contrib/install-deps.sh when a dependency is missing.

PKG_CONFIG ?= pkg-config
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
DATADIR    ?= $(PREFIX)/share/v7fill
COMPLETIONSDIR ?= $(PREFIX)/share/bash-completion/completions
VERSION    := 0.1.0

ifeq ($(SAN),1)
BUILD      ?= build-san
else
BUILD      ?= build
endif

PKGS       := libpq libzstd libcrypto cmocka jansson libxxhash libmicrohttpd
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs libpq libzstd libcrypto jansson libxxhash libmicrohttpd 2>/dev/null)
CMOCKA_LIBS:= $(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null)
CSV_LIBS   := -lcsv   # Debian's libcsv-dev ships no .pc file

# Warnings: -Wshadow (a shadowed err/res is a classic bug), -Wstrict-prototypes and
# -Wmissing-prototypes (every extern has a header), -Wformat=2 (printf-style
# checks on our own V7FILL_PRINTF functions), -Wvla (sizes from input never
# go on the stack), -Wimplicit-fallthrough, -Wundef.  -Wno-missing-field-initializers
# lets `= {0}` initialise structs; -Wno-format-truncation because messages are
# truncated on purpose (snprintf into fixed Err buffers).
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
        -Wvla -Wpointer-arith -Wimplicit-fallthrough -Wundef -Wno-missing-field-initializers -Wno-format-truncation
# clang takes the same set, but does not know gcc's -Wformat-truncation.
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1)),)
WARN := $(filter-out -Wno-format-truncation,$(WARN))
endif

override CPPFLAGS += -Iinclude -D_GNU_SOURCE -DV7FILL_VERSION=\"$(VERSION)\" -MMD -MP
override CFLAGS   += -std=c11 -pthread -g $(WARN) $(PKG_CFLAGS)
ifeq ($(SAN),1)
override CFLAGS   += -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
override LDFLAGS  += -fsanitize=address,undefined
else
override CFLAGS   += -O2 -fstack-protector-strong -D_FORTIFY_SOURCE=2
endif
LDLIBS += $(PKG_LIBS) $(CSV_LIBS) -lm -pthread

LIB_SRCS  := $(sort $(wildcard src/*.c))
CLI_SRCS  := $(sort $(wildcard src/cli/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
CLI_OBJS  := $(CLI_SRCS:%.c=$(BUILD)/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
# test_rejects counts fsync calls
UNIT_LDFLAGS_test_rejects := -Wl,--wrap=fsync
BENCH_SRCS:= $(sort $(wildcard bench/bench_*.c))
BENCH_BINS:= $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)

.PHONY: all check check-real unit unit-clang integration san tsan demo demo-real bench bench-real bench-stream bench-stream-real bench-migrate bench-migrate-real fuzz install install-completion clean deps

all: $(BUILD)/libv7fill.a $(BUILD)/v7fill

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "CC $<"
	@$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(BUILD)/libv7fill.a: $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/v7fill: $(CLI_OBJS) $(BUILD)/libv7fill.a
	@echo "LINK $@"
	@$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/libv7fill.a $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libv7fill.a
	@mkdir -p $(dir $@)
	@echo "LINK $@"
	@$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $(UNIT_LDFLAGS_$*) -o $@ $< $(BUILD)/libv7fill.a $(LDLIBS) $(CMOCKA_LIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libv7fill.a
	@mkdir -p $(dir $@)
	@echo "LINK $@"
	@$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libv7fill.a $(LDLIBS)

deps:
	@contrib/install-deps.sh --if-missing

check: deps
	@$(MAKE) --no-print-directory check-real

check-real: unit integration

unit: $(UNIT_BINS)
	@set -e; for t in $(UNIT_BINS); do echo "== $$t"; $$t; done

# make check SKIP_TESTS="t_a t_b": every integration test but those (CI runs t_citus once, in
# the sanitizer pass; see .ci/run).
SKIP_TESTS ?=
ifneq ($(strip $(SKIP_TESTS)),)
TESTS ?= $(filter-out $(SKIP_TESTS:%=tests/integration/%.sh),$(sort $(wildcard tests/integration/t_*.sh)))
endif
# make check TEST_JOBS=N: N integration tests at a time, each worker with a cluster of its own
# (CI uses 2, one per core; see tests/integration/README.md).
TEST_JOBS ?= 1
integration: $(BUILD)/v7fill
	TEST_JOBS=$(TEST_JOBS) V7FILL=$(CURDIR)/$(BUILD)/v7fill tests/integration/run.sh $(TESTS)

san:
	@$(MAKE) --no-print-directory check SAN=1

# make unit-clang: the unit tests again, built by clang under ASan + UBSan (build-clang-san/).
# Its UBSan checks what gcc's leaves out: pointer-overflow includes a zero offset applied to a
# NULL pointer (memcpy's source of an empty value), which test_mem feeds the JSON encoder.
unit-clang:
	@$(MAKE) --no-print-directory unit CC=clang SAN=1 BUILD=build-clang-san

# make tsan: ThreadSanitizer over the tests that drive the import's reader and writer
# threads, the stream's, and the switch back's (build-tsan/; a reported race fails the test).
TSAN_TESTS ?= t_import_basic t_import_batches t_import_concurrent t_import_dedup \
              t_import_kill t_import_poison t_import_reconnect t_fault_rejects \
              t_import_timezones t_import_interrupt t_import_jobs t_stream_basic \
              t_stream_restart t_stream_operate t_stream_jobs t_fault_commit_ack \
              t_migrate_twodb_follow t_stream_multi t_stream_multi_stall t_import_record \
              t_stream_streaming t_migrate_childreverse t_migrate_twodb_childtable
tsan: deps
	@$(MAKE) --no-print-directory BUILD=build-tsan CFLAGS="-fsanitize=thread -O1" \
	    LDFLAGS=-fsanitize=thread build-tsan/v7fill
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" TEST_JOBS=$(TEST_JOBS) V7FILL=$(CURDIR)/build-tsan/v7fill \
	    tests/integration/run.sh $(TSAN_TESTS:%=tests/integration/%.sh)

demo: deps
	@$(MAKE) --no-print-directory demo-real

demo-real: $(BUILD)/v7fill
	V7FILL=$(CURDIR)/$(BUILD)/v7fill examples/demo.sh

bench: deps
	@$(MAKE) --no-print-directory bench-real

bench-real: $(BENCH_BINS) $(BUILD)/v7fill
	@set -e; for b in $(BENCH_BINS); do $$b; done
	@if [ -x bench/bench_import.sh ]; then V7FILL=$(CURDIR)/$(BUILD)/v7fill bench/bench_import.sh; fi
	@$(MAKE) --no-print-directory bench-stream-real
	@$(MAKE) --no-print-directory bench-migrate-real

bench-stream: deps
	@$(MAKE) --no-print-directory bench-stream-real

bench-stream-real: $(BUILD)/v7fill
	@V7FILL=$(CURDIR)/$(BUILD)/v7fill bench/bench_stream.sh

bench-migrate: deps
	@$(MAKE) --no-print-directory bench-migrate-real

bench-migrate-real: $(BUILD)/v7fill
	@V7FILL=$(CURDIR)/$(BUILD)/v7fill bench/bench_migrate.sh

# make fuzz [FUZZ_SECONDS=N] [FUZZ_TARGETS="fuzz_csv fuzz_zstd"]: every target built with
# clang (libFuzzer + ASan + UBSan; undefined behaviour aborts), the library compiled once
# into build-fuzz/.  Each target then runs FUZZ_SECONDS on build-fuzz/corpus-NAME, seeded
# from tests/fuzz/corpus/NAME, one after the other.  A crash, leak or hang (-timeout) keeps
# its input in build-fuzz/artifacts-NAME/; the remaining targets still run, and make fails
# at the end.  CI: make fuzz FUZZ_SECONDS=10.
FUZZ_SECONDS ?= 30
FUZZ_TIMEOUT ?= 30
FUZZ_CC      ?= clang
FUZZ_SRCS    := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGETS ?= $(FUZZ_SRCS:tests/fuzz/%.c=%)
FUZZ_CFLAGS  := $(CPPFLAGS) -g -O1 -std=c11 $(PKG_CFLAGS) \
                -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_OBJS    := $(LIB_SRCS:%.c=build-fuzz/%.o)

build-fuzz/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	@echo "CC (fuzz) $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

build-fuzz/libv7fill.a: $(FUZZ_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c build-fuzz/libv7fill.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< build-fuzz/libv7fill.a $(LDLIBS)

fuzz: $(FUZZ_TARGETS:%=build-fuzz/%)
	@failed=""; for n in $(FUZZ_TARGETS); do \
	    mkdir -p build-fuzz/corpus-$$n build-fuzz/artifacts-$$n; \
	    seeds=""; if [ -d tests/fuzz/corpus/$$n ]; then seeds=tests/fuzz/corpus/$$n; fi; \
	    echo "== $$n: $(FUZZ_SECONDS) s"; \
	    if build-fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) -print_final_stats=1 \
	            -artifact_prefix=build-fuzz/artifacts-$$n/ build-fuzz/corpus-$$n $$seeds \
	            >build-fuzz/$$n.log 2>&1; then \
	        grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' \
	            build-fuzz/$$n.log | sed 's/^/   /'; \
	    else \
	        tail -n 40 build-fuzz/$$n.log; failed="$$failed $$n"; \
	        echo "   FAILED: reproduce with build-fuzz/$$n build-fuzz/artifacts-$$n/<file>"; \
	    fi; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: failed:$$failed"; exit 1; fi; \
	echo "fuzz: $(words $(FUZZ_TARGETS)) targets, no finding"

-include $(FUZZ_OBJS:.o=.d)

# make valgrind: every unit test binary of the normal build under valgrind memcheck.
# Any memory error or leak (definite, indirect, possible) fails; all binaries still run.
VALGRIND       ?= valgrind
VALGRIND_FLAGS ?= --error-exitcode=1 --leak-check=full --show-leak-kinds=definite,indirect,possible \
                  --errors-for-leak-kinds=definite,indirect,possible --track-origins=yes --quiet
.PHONY: valgrind
valgrind: $(UNIT_BINS)
	@if [ "$(SAN)" = 1 ]; then echo "valgrind: not with SAN=1 (ASan and valgrind exclude each other)" >&2; exit 2; fi
	@failed=""; for t in $(UNIT_BINS); do \
	    echo "== valgrind $$t"; \
	    $(VALGRIND) $(VALGRIND_FLAGS) $$t >$$t.valgrind.log 2>&1 || { cat $$t.valgrind.log; failed="$$failed $$t"; }; \
	    grep -E '^\[  (PASSED|FAILED)' $$t.valgrind.log | sed 's/^/   /'; \
	done; \
	if [ -n "$$failed" ]; then echo "valgrind: failed:$$failed"; exit 1; fi; \
	echo "valgrind: $(words $(UNIT_BINS)) unit test binaries clean"

install: $(BUILD)/v7fill install-completion
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(DATADIR)/sql
	install -m 755 $(BUILD)/v7fill $(DESTDIR)$(BINDIR)/v7fill
	install -m 644 docs/v7fill.1 $(DESTDIR)$(MANDIR)/man1/v7fill.1
	install -m 644 contrib/sql/*.sql $(DESTDIR)$(DATADIR)/sql/

# bash completion, loaded on demand by the bash-completion package
install-completion:
	install -d $(DESTDIR)$(COMPLETIONSDIR)
	install -m 644 contrib/v7fill.bash-completion $(DESTDIR)$(COMPLETIONSDIR)/v7fill

clean:
	rm -rf build build-san build-clang-san build-tsan build-fuzz

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d)
