# SPDX-License-Identifier: GPL-2.0
# srnic top-level entry: build, install, run, check, package.
#
#   make            build srnic.ko and libsrnic-rdmav<ABI>.so
#   make run        boot a VM, create two srnic devices on a veth pair, show them, move data
#   make check      every test on the primary platform (unit tests under sanitizers,
#                   checkpatch, fuzzing, VM suites), and on each other platform the
#                   suites of what differs there (PLATFORM_SUITES); CI runs this
#   make check PLATFORM=NAME   every test on platform NAME only
#   make check-all  every test on every platform (the full matrix)
#   make deb        the .deb packages of PLATFORM in build/deb/PLATFORM/
#   make root       make PLATFORM's root for the VM if missing (scripts/platform-root.sh)
#   make fuzz       fuzz the packet parser for FUZZ_SECONDS (60) on the host
#   make bench      the benchmark (Documentation/performance.rst), one VM boot
#   make debug-check the VM suites under a KASAN/lockdep/kmemleak kernel (debug-kernel)
#   make install    install module + provider on this host (uninstall: reverse)
#
# PLATFORM is one of scripts/platforms.conf (bookworm, trixie, sid; default: the
# one make runs on, the host's bookworm: the primary platform). For the others every build runs inside
# that platform's debootstrap root (scripts/platform run), against its kernel
# headers and its rdma-core, into build/platform/PLATFORM/; the VM boots that
# root's kernel and userspace. See Documentation/platforms.rst.

PRIMARY_PLATFORM := bookworm
# Default: the platform make runs on (the host's, or the root's inside one), else the primary.
HOST_PLATFORM := $(shell p=$$(scripts/platform host); scripts/platform check $$p 2>/dev/null && echo $$p)
PLATFORM ?= $(or $(HOST_PLATFORM),$(PRIMARY_PLATFORM))
override PLATFORM_OK := $(shell scripts/platform check $(PLATFORM) 2>&1)
ifneq ($(PLATFORM_OK),)
$(error $(PLATFORM_OK))
endif
ALL_PLATFORMS := $(shell scripts/platform names)
OTHER_PLATFORMS := $(filter-out $(PRIMARY_PLATFORM),$(ALL_PLATFORMS))
# yes when PLATFORM's root is the system make runs on (the host, or inside a root)
ON_PLATFORM := $(shell scripts/platform is-host $(PLATFORM) && echo yes)
PLATFORM_RUN := scripts/platform run $(PLATFORM) --

BUILD := build
PLATFORM_BUILD := $(shell scripts/platform build-dir $(PLATFORM))
ifeq ($(PLATFORM),$(PRIMARY_PLATFORM))
MODULE_BUILD := $(CURDIR)
PROVIDER_BUILD := $(BUILD)/userspace
PROVIDER_ASAN_BUILD := $(BUILD)/userspace-asan
else
MODULE_BUILD := $(CURDIR)/$(PLATFORM_BUILD)/module
PROVIDER_BUILD := $(PLATFORM_BUILD)/userspace
PROVIDER_ASAN_BUILD := $(PLATFORM_BUILD)/userspace-asan
endif
MODULE_KO := $(MODULE_BUILD)/srnic.ko
DEB_DIR := $(BUILD)/deb/$(PLATFORM)

ifeq ($(ON_PLATFORM),yes)
KVER ?= $(shell scripts/kernel-version.sh)
KDIR ?= /lib/modules/$(KVER)/build
VERBS_LIBDIR ?= $(shell pkg-config --variable=libdir libibverbs 2>/dev/null || echo /usr/lib/x86_64-linux-gnu)
endif
PROVIDER_DIR = $(DESTDIR)$(VERBS_LIBDIR)/libibverbs
DRIVER_CONF := $(DESTDIR)/etc/libibverbs.d/srnic.driver
MODULE_DIR = $(DESTDIR)/lib/modules/$(KVER)/updates
# srnic(7): what an operator needs on one page (Documentation/srnic.7).
MAN_PAGE := $(DESTDIR)/usr/share/man/man7/srnic.7
# The provider's file name carries libibverbs' private ABI, which CMake reads.
PROVIDER_LIB = $(firstword $(wildcard $(PROVIDER_BUILD)/libsrnic-rdmav*.so))
CHECKPATCH := $(BUILD)/checkpatch/checkpatch.pl
# The kernel's own kernel-doc (Debian's linux-kbuild package, which the headers bring).
KERNEL_DOC ?= $(firstword $(wildcard /usr/lib/linux-kbuild-*/scripts/kernel-doc))
# tests/test_packages.py runs under scripts/package-test.sh (make package-test), which
# installs the packages first.
VM_SUITES := $(sort $(filter-out tests/test_packages.py,$(wildcard tests/test_*.py)))
DEBUG_SUITES ?= $(VM_SUITES)
# What `make check` runs on the platforms other than the primary: the suites of the code
# that differs between kernels and rdma-cores (device and provider loading, ODP, CQ creation
# and resize, the direct path's mmap and ptrace check, RC traffic, rdma_cm, rdma-core's own
# suite against srnic and that kernel's rxe); the packages' test runs there too, with
# ibv_rc_pingpong, perftest's six RC tools and librdmacm's tools from the installed files
# (scripts/check.sh runs all this beside the primary's every test); and every kernel ULP's
# suite, because each kernel has its own ULPs: NVMe over RDMA, NFS over RDMA, iSER, SRP and
# RDS on one kernel, teardown under their traffic; ECN, selective repeat, QP scale, libfabric
# and UCX, tracepoints, the man page, rdma resource, per-QP counters (ib_core's counter API
# changed in 6.15) and packet capture. Interop with that kernel's rxe:
# test_ecn_interop's RC traffic and CNPs to it; the suites' other rxe cases (NFS to rxe,
# selective repeat's go-back-N with rxe) are the primary's (tests/conftest.py). The suites
# between two kernels (test_ulp_two_kernels, test_rc_two_kernels: 9 minutes) run on the
# primary only, for CI's 75 minutes: make check PLATFORM=NAME runs them everywhere.
PLATFORM_SUITES ?= tests/test_device.py tests/test_odp.py tests/test_cq.py \
	tests/test_cq_resize.py tests/test_direct_path.py tests/test_direct_send.py \
	tests/test_rc_traffic.py tests/test_rdmacm.py tests/test_rdma_core.py \
	tests/test_nvme_rdma.py tests/test_nfs_rdma.py tests/test_iser.py \
	tests/test_srp.py tests/test_rds.py tests/test_ulp_teardown.py tests/test_ecn.py \
	tests/test_ecn_interop.py tests/test_selective_repeat.py tests/test_qp_scale.py \
	tests/test_libfabric_ucx.py tests/test_trace.py tests/test_man.py \
	tests/test_rdma_resource.py tests/test_qp_counters.py tests/test_capture.py \
	tests/test_dmabuf_mr.py tests/test_raw_packet.py tests/test_tag_matching.py \
	tests/test_flush.py

# libFuzzer target over kernel/srnic_wire.c, built with clang from the kernel
# source through the userspace shim (userspace/fuzz/fuzz_wire.cpp).
CLANG ?= clang
CLANGXX ?= clang++
FUZZ_BUILD := $(BUILD)/fuzz
FUZZ_WIRE := $(FUZZ_BUILD)/fuzz_wire
FUZZ_WIRE_CORPUS := userspace/fuzz/corpus/wire
FUZZ_SECONDS ?= 60
# make check's run: the kept corpus replayed, then 30 s of new inputs (CI's 75 minutes).
CHECK_FUZZ_SECONDS ?= 30
FUZZ_RUNS ?= -1
FUZZ_ARGS ?=
FUZZ_CFLAGS := -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Werror \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-Ikernel -Iuserspace/tests/kshim
FUZZ_WIRE_SRCS := userspace/fuzz/fuzz_wire.cpp kernel/srnic_wire.c \
	userspace/tests/kshim/crc32.c
FUZZ_WIRE_DEPS := $(FUZZ_WIRE_SRCS) kernel/srnic_wire.h kernel/srnic_wire_compat.h \
	userspace/tests/kshim/srnic_kshim.h

.PHONY: all module provider deps root install install-module install-provider install-man \
	uninstall run check check-primary check-platform check-all unit-test checkpatch layering \
	fuzz fuzz-build fuzz-merge vm-test print-platform-suites print-platform-topologies bench debug-kernel debug-check \
	deb package-test compat-report platform-info clean

all: module provider

deps:
	scripts/setup-deps.sh

# PLATFORM's root for the VM and the builds (nothing to make for the primary).
root:
	scripts/platform root $(PLATFORM) >/dev/null

platform-info:
	@scripts/platform version-line $(PLATFORM)

ifeq ($(ON_PLATFORM),yes)
# ---- Builds on the running system (the host, or inside PLATFORM's root) ----------------

# The primary platform builds in the tree (srnic.ko in the repo root); the others in
# build/platform/PLATFORM/module, from links to the sources.
module:
ifneq ($(PLATFORM),$(PRIMARY_PLATFORM))
	rm -rf $(MODULE_BUILD)/kernel
	mkdir -p $(MODULE_BUILD)/kernel
	ln -sfn $(CURDIR)/Kbuild $(MODULE_BUILD)/Kbuild
	ln -sfn $(CURDIR)/kernel/uapi $(MODULE_BUILD)/kernel/uapi
	ln -sf $(addprefix $(CURDIR)/,$(wildcard kernel/*.c kernel/*.h kernel/*.sh)) \
		$(MODULE_BUILD)/kernel/
	mkdir -p $(MODULE_BUILD)/kernel/test
	ln -sf $(addprefix $(CURDIR)/,$(wildcard kernel/test/*.c)) $(MODULE_BUILD)/kernel/test/
endif
	$(MAKE) -C $(KDIR) M=$(MODULE_BUILD) SRNIC_TEST_MODULE=y modules

# The kernel interfaces srnic_compat.h found in KDIR's headers.
compat-report:
	@echo "srnic compat for $(KVER) ($(KDIR)):"
	@src=$$(sed -n 's/^include \(.*\)\/Makefile$$/\1/p' $(KDIR)/Makefile | head -n 1); \
		sh kernel/compat-probe.sh $${src:-$(KDIR)} --report | sed 's/^/  /'

# The unit tests build and run under sanitizers only (unit-test), not twice.
provider:
	cmake -S userspace -B $(PROVIDER_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DSRNIC_BUILD_TESTS=OFF >/dev/null
	cmake --build $(PROVIDER_BUILD) -j2

# The sanitizer build is unoptimised (-O0): it compiles in a third of RelWithDebInfo's time
# (70 s against 200 s here, on each of make check's three platforms); the shipped provider's
# optimised build (make provider) still compiles every source with -Werror.
unit-test:
	cmake -S userspace -B $(PROVIDER_ASAN_BUILD) -DSRNIC_SANITIZE=ON \
		-DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build $(PROVIDER_ASAN_BUILD) -j2
	ctest --test-dir $(PROVIDER_ASAN_BUILD) --output-on-failure

# PLATFORM's packages (srnic-dkms, ibverbs-provider-srnic), built with Debian's tools.
deb:
	scripts/build-deb.sh $(DEB_DIR)

else
# ---- Builds for another platform: the same targets inside its root ---------------------

# A failure on a platform whose kernel or rdma-core moved past the ones srnic was ported
# to (sid) says so: scripts/platform-build-report.
module provider unit-test deb compat-report:
	$(PLATFORM_RUN) $(MAKE) --no-print-directory $@ PLATFORM=$(PLATFORM) || \
		{ scripts/platform-build-report $(PLATFORM) $@; exit 1; }
endif

# The kernel files call only down the role order of scripts/kernel-layers.conf
# (Documentation/design.rst), in PLATFORM's objects: its compat adapters differ.
layering:
	test -f $(MODULE_KO) || $(MAKE) module
	scripts/kernel-call-edges.py --quiet --order scripts/kernel-layers.conf \
		$(MODULE_BUILD)/kernel/srnic_*.o

# Installing never rebuilds what is already built (it also runs in the VM).
install: install-module install-provider install-man

install-module:
	test -f $(MODULE_KO) || $(MAKE) module
	install -D -m 0644 $(MODULE_KO) $(MODULE_DIR)/srnic.ko
	if [ -z "$(DESTDIR)" ]; then depmod -a $(KVER); fi

install-provider:
	test -n "$(PROVIDER_LIB)" || $(MAKE) provider
	lib=$$(ls $(PROVIDER_BUILD)/libsrnic-rdmav*.so) && \
		install -D -m 0644 $$lib $(PROVIDER_DIR)/$$(basename $$lib)
	install -d $(dir $(DRIVER_CONF))
	echo "driver srnic" > $(DRIVER_CONF)

install-man:
	install -D -m 0644 Documentation/srnic.7 $(MAN_PAGE)

# depmod only when a module went (it takes minutes in the TCG VM).
uninstall:
	rm -f $(PROVIDER_DIR)/libsrnic-rdmav*.so $(DRIVER_CONF) $(MAN_PAGE)
	if [ -e $(MODULE_DIR)/srnic.ko ]; then rm -f $(MODULE_DIR)/srnic.ko && \
		if [ -z "$(DESTDIR)" ]; then depmod -a $(KVER); fi; fi

# The main job: deps, build, VM, two devices on a veth pair, shown, data moved.
run: deps root all
	scripts/vm-run --platform $(PLATFORM) -- scripts/demo.sh

$(CHECKPATCH):
	scripts/extract-checkpatch.sh $(dir $@)

checkpatch: $(CHECKPATCH)
	$(CHECKPATCH) --no-tree --strict --quiet -f $(filter-out kernel/srnic_trace.h,$(wildcard kernel/*.c kernel/*.h)) kernel/test/*.c
	# TRACE_EVENT()'s macro layout trips --strict's parenthesis checks, in the kernel's own
	# include/trace/events/ as here: the trace header gets checkpatch's default checks.
	$(CHECKPATCH) --no-tree --quiet -f kernel/srnic_trace.h
	# Each function srnic.h declares stands under the heading of the file that defines it.
	scripts/kernel-header-check.py kernel/srnic.h
	# Every struct member and function documented in kernel-doc form is documented whole.
	out=$$(perl $(KERNEL_DOC) -none kernel/*.c kernel/*.h kernel/test/*.c 2>&1); \
		[ -z "$$out" ] || { echo "$$out"; echo "kernel-doc: fix the comments above"; exit 1; }
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

# The pytest suites (tests/test_*.py, or VM_SUITES=...) in VMs of PLATFORM, several suites per
# boot (scripts/run-vm-suites.sh; SRNIC_VM_GROUP=1 boots one per suite).
vm-test: root all
	scripts/run-vm-suites.sh --platform $(PLATFORM) $(VM_SUITES)

# PLATFORM's packages (make deb first) installed into an overlay of its root, used in its
# VM (tests/test_packages.py), purged, nothing left behind (scripts/package-test.sh).
package-test: root
	scripts/package-test.sh $(PLATFORM)

# Every test on PLATFORM: what does not need a VM (on the host: checkpatch and the fuzzer
# look at the sources, which are the same everywhere), then the VM suites.
check-platform: deps root all layering unit-test
ifeq ($(PLATFORM),$(PRIMARY_PLATFORM))
	$(MAKE) checkpatch fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)
endif
	$(MAKE) vm-test PLATFORM=$(PLATFORM)
	$(MAKE) deb package-test PLATFORM=$(PLATFORM)

# The topology (tests/topology.py) of those suites there: the wire between two namespaces
# (UDP tunnel, routes, IPv6 lookups: what differs); test_direct_path and test_direct_send are
# one device's by themselves. rxe interop is the primary's (every RC suite, both ways).
PLATFORM_TOPOLOGIES ?= veth-two-netns

print-platform-suites:
	@echo $(PLATFORM_SUITES)

print-platform-topologies:
	@echo $(PLATFORM_TOPOLOGIES)

print-check-fuzz-seconds:
	@echo $(CHECK_FUZZ_SECONDS)

# Without PLATFORM: every test on the primary platform, and on the others their builds,
# unit tests, packages and PLATFORM_SUITES (scripts/check.sh). With PLATFORM=NAME: every
# test on NAME only.
ifeq ($(origin PLATFORM),command line)
check: check-platform
else
check:
	scripts/check.sh
endif

check-all:
	set -e; for p in $(ALL_PLATFORMS); do $(MAKE) check-platform PLATFORM=$$p; done

# perftest on srnic and rxe, srnic over the wire, memcpy, syscalls per post:
# one table, also in build/bench/results.txt (and .json).
bench: deps root all
	scripts/bench.sh --platform $(PLATFORM)

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
	$(MAKE) -C /lib/modules/$(shell scripts/kernel-version.sh)/build M=$(CURDIR) clean
	rm -rf $(BUILD)
