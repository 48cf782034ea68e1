# SPDX-License-Identifier: GPL-2.0
# srnic top-level entry: build, install, run, check.
#
#   make            build srnic.ko and libsrnic-rdmav34.so
#   make run        boot a VM, create two srnic devices on a veth pair, show them
#   make check      every test: unit tests (sanitizers), checkpatch, fuzzing, VM suites
#   make fuzz       fuzz the packet parser for FUZZ_SECONDS (60) on the host
#   make bench      the benchmark (Documentation/performance.rst), one VM boot
#   make debug-check the VM suites under a KASAN/lockdep/kmemleak kernel (debug-kernel)
#   make install    install module + provider on this host (uninstall: reverse)
#
# Everything is built for the newest Debian kernel under /boot (the one the
# VM boots); KVER=... overrides it.

KVER ?= $(shell scripts/kernel-version.sh)
KDIR ?= /lib/modules/$(KVER)/build
BUILD := build
PROVIDER_BUILD := $(BUILD)/userspace
PROVIDER_ASAN_BUILD := $(BUILD)/userspace-asan
PROVIDER_LIB := $(PROVIDER_BUILD)/libsrnic-rdmav34.so
VERBS_LIBDIR ?= $(shell pkg-config --variable=libdir libibverbs 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
PROVIDER_DIR := $(DESTDIR)$(VERBS_LIBDIR)/libibverbs
DRIVER_CONF := $(DESTDIR)/etc/libibverbs.d/srnic.driver
MODULE_DIR := $(DESTDIR)/lib/modules/$(KVER)/updates
CHECKPATCH := $(BUILD)/checkpatch/checkpatch.pl
VM_SUITES := $(sort $(wildcard tests/test_*.py))
DEBUG_SUITES ?= $(VM_SUITES)

# libFuzzer target over kernel/srnic_wire.c, built with clang from the kernel
# source through the userspace shim (userspace/fuzz/fuzz_wire.cpp).
CLANG ?= clang
CLANGXX ?= clang++
FUZZ_BUILD := $(BUILD)/fuzz
FUZZ_WIRE := $(FUZZ_BUILD)/fuzz_wire
FUZZ_WIRE_CORPUS := userspace/fuzz/corpus/wire
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= -1
FUZZ_ARGS ?=
FUZZ_CFLAGS := -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Werror \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Ikernel -Iuserspace/tests/kshim
FUZZ_WIRE_SRCS := userspace/fuzz/fuzz_wire.cpp kernel/srnic_wire.c \
	userspace/tests/kshim/crc32.c
FUZZ_WIRE_DEPS := $(FUZZ_WIRE_SRCS) kernel/srnic_wire.h kernel/srnic_wire_compat.h \
	userspace/tests/kshim/srnic_kshim.h

.PHONY: all module provider deps install install-module install-provider \
	uninstall run check unit-test checkpatch fuzz fuzz-build fuzz-merge vm-test bench \
	debug-kernel debug-check clean

all: module provider

deps:
	scripts/setup-deps.sh

module:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

provider:
	cmake -S userspace -B $(PROVIDER_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(PROVIDER_BUILD) -j2

# Installing never rebuilds what is already built (it also runs in the VM).
install: install-module install-provider

install-module:
	test -f srnic.ko || $(MAKE) module
	install -D -m 0644 srnic.ko $(MODULE_DIR)/srnic.ko
	if [ -z "$(DESTDIR)" ]; then depmod -a $(KVER); fi

install-provider:
	test -f $(PROVIDER_LIB) || $(MAKE) provider
	install -D -m 0644 $(PROVIDER_LIB) $(PROVIDER_DIR)/libsrnic-rdmav34.so
	install -d $(dir $(DRIVER_CONF))
	echo "driver srnic" > $(DRIVER_CONF)

uninstall:
	rm -f $(MODULE_DIR)/srnic.ko $(PROVIDER_DIR)/libsrnic-rdmav34.so $(DRIVER_CONF)
	if [ -z "$(DESTDIR)" ]; then depmod -a $(KVER); fi

# The main job: deps, build, VM, two devices on a veth pair, shown.
run: deps all
	scripts/vm-run -- scripts/demo.sh

unit-test:
	cmake -S userspace -B $(PROVIDER_ASAN_BUILD) -DSRNIC_SANITIZE=ON >/dev/null
	cmake --build $(PROVIDER_ASAN_BUILD) -j2
	ctest --test-dir $(PROVIDER_ASAN_BUILD) --output-on-failure

$(CHECKPATCH):
	scripts/extract-checkpatch.sh $(dir $@)

checkpatch: $(CHECKPATCH)
	$(CHECKPATCH) --no-tree --strict --quiet -f kernel/*.c kernel/*.h
	$(CHECKPATCH) --no-tree --quiet --ignore CAMELCASE -f kernel/uapi/rdma/srnic-abi.h

$(FUZZ_WIRE): $(FUZZ_WIRE_DEPS) Makefile
	mkdir -p $(FUZZ_BUILD)
	$(CLANG) -std=gnu11 $(FUZZ_CFLAGS) -c kernel/srnic_wire.c -o $(FUZZ_BUILD)/srnic_wire.o
	$(CLANG) -std=gnu11 $(FUZZ_CFLAGS) -c userspace/tests/kshim/crc32.c -o $(FUZZ_BUILD)/crc32.o
	$(CLANGXX) -std=c++20 $(FUZZ_CFLAGS) userspace/fuzz/fuzz_wire.cpp \
		$(FUZZ_BUILD)/srnic_wire.o $(FUZZ_BUILD)/crc32.o -o $@

fuzz-build: $(FUZZ_WIRE)

# On the host, bounded in time, on a copy of the kept corpus; any crash or
# sanitizer report fails it. FUZZ_SECONDS=3600 for a long run, FUZZ_RUNS to
# cap executions, FUZZ_ARGS for more libFuzzer flags.
fuzz: $(FUZZ_WIRE)
	FUZZ_ARGS="$(FUZZ_ARGS)" scripts/run-fuzz.sh $(FUZZ_WIRE) \
		$(FUZZ_WIRE_CORPUS) $(FUZZ_BUILD)/wire $(FUZZ_SECONDS) $(FUZZ_RUNS)

# Keep what a run found: add to the kept corpus only the inputs of the last
# `make fuzz` that reach coverage the corpus does not have.
fuzz-merge: $(FUZZ_WIRE)
	$(FUZZ_WIRE) -merge=1 -max_len=1024 -use_value_profile=1 \
		$(FUZZ_WIRE_CORPUS) $(FUZZ_BUILD)/wire/corpus

# One VM boot per pytest suite (tests/test_*.py).
vm-test: all
	scripts/run-vm-suites.sh $(VM_SUITES)

check: deps all unit-test checkpatch fuzz vm-test

# perftest on srnic and rxe, srnic over the wire, memcpy, syscalls per post:
# one table, also in build/bench/results.txt (and .json).
bench: deps all
	scripts/bench.sh

# A debug kernel from Debian's linux-source-6.1 (KASAN, lockdep, DEBUG_ATOMIC_SLEEP,
# kmemleak...; scripts/debug-kernel.sh, scripts/debug-kernel.config), built once and
# cached in ~/.cache/srnic; debug-check builds srnic.ko against it and runs the VM
# suites (DEBUG_SUITES=...) under it, failing on any kernel report. Not part of `check`:
# the first build takes the better part of an hour on two cores.
debug-kernel: deps
	scripts/debug-kernel.sh build

debug-check: deps provider
	scripts/debug-kernel.sh check $(DEBUG_SUITES)

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	rm -rf $(BUILD)
