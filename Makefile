# SPDX-License-Identifier: GPL-2.0
# srnic top-level entry: build, install, run, check.
#
#   make            build srnic.ko and libsrnic-rdmav34.so
#   make run        boot a VM, create two srnic devices on a veth pair, show them
#   make check      every test: unit tests (sanitizers), checkpatch, VM suites
#   make bench      the benchmark (Documentation/performance.rst), one VM boot
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

.PHONY: all module provider deps install install-module install-provider \
	uninstall run check unit-test checkpatch vm-test bench clean

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

# One VM boot per pytest suite (tests/test_*.py).
vm-test: all
	scripts/run-vm-suites.sh $(VM_SUITES)

check: deps all unit-test checkpatch vm-test

# perftest on srnic and rxe, srnic over the wire, memcpy, syscalls per post:
# one table, also in build/bench/results.txt (and .json).
bench: deps all
	scripts/bench.sh

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	rm -rf $(BUILD)
