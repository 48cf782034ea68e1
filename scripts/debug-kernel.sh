#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# debug-kernel.sh: build (once, cached outside the repo) a debug kernel from Debian's
# linux-source-6.1 -- KASAN, lockdep (PROVE_LOCKING), DEBUG_ATOMIC_SLEEP, kmemleak, DEBUG_LIST,
# DEBUG_OBJECTS, UBSAN bounds -- and run srnic's VM suites under it.
#
# Usage: scripts/debug-kernel.sh build          build the kernel if it is not cached; print its dir
#        scripts/debug-kernel.sh dir            print the cache dir (built or not)
#        scripts/debug-kernel.sh module         build srnic.ko against it (build/debug-kernel/)
#        scripts/debug-kernel.sh check [SUITE...]
#                                               build all that, run the VM suites under it
#                                               (default: every tests/test_*.py), check each
#                                               console log and kmemleak
#        scripts/debug-kernel.sh vm-run [VM-RUN ARGS...]
#                                               scripts/vm-run under the debug kernel
#
# The kernel: x86_64_defconfig + scripts/debug-kernel.config (merge_config.sh, olddefconfig);
# what the VM needs (virtio, 9p, overlay, PVH entry) is built in, the RDMA stack, veth and
# rdma_rxe are modules as on Debian's kernel. Built with `nice -n 19 make -j$(nproc)` in
#   ${SRNIC_DEBUG_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/srnic}/debug-kernel-<key>/
# where <key> hashes the linux-source package version, the config fragment, the compiler and
# DEBUG_KERNEL_RECIPE below (bump it when the build steps change). That dir holds src/ (the
# configured and built tree, the KDIR for out-of-tree modules), modroot/lib/modules/<release>
# (modules_install), bzImage, release and build.log; `complete` marks a finished build. Older
# builds are not removed automatically: `rm -rf` the cache dir to reclaim the space (~4 GiB).
#
# srnic.ko for this kernel is built in build/debug-kernel/module (a copy of Kbuild and kernel/,
# so the repo's own srnic.ko for the stock kernel stays as it is), with KCFLAGS=-g so that
# reports can be decoded to file:line (scripts/faddr2line in the kernel tree, or gdb).
#
# `check` boots each suite in its own VM (scripts/run-vm-suites.sh with SRNIC_VM_GROUP=1, SRNIC_VM_KERNEL,
# SRNIC_VM_KVER and SRNIC_VM_MODULES set), then at the end of every VM asks kmemleak for a scan
# (SRNIC_VM_KMEMLEAK=1 in scripts/vm-guest-init.sh: the report goes to the console log) and
# fails on any report in the console logs (scripts/vm-console-check.sh: KASAN, lockdep, sleeping
# in atomic context, kmemleak, UBSAN, ODEBUG, WARN, BUG, oops). Environment: SRNIC_VM_SUITE_TIMEOUT
# (default here 3600 s per suite: KASAN under TCG is slow), and the variables
# scripts/run-vm-suites.sh passes on (SRNIC_TEST_TOPOLOGIES, SRNIC_STRESS_MESSAGES,
# PYTEST_ADDOPTS, SRNIC_TEST_WC_TIMEOUT, SRNIC_TEST_TOOL_TIMEOUT, SRNIC_TEST_ACK_TIMEOUT), whose
# defaults here are longer (--timeout=1200, 30 s, 240 s, 16).
set -euo pipefail

REPO=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd -P)
DEBUG_KERNEL_RECIPE=1
SOURCE_PKG=linux-source-6.1
SOURCE_TAR=/usr/src/$SOURCE_PKG.tar.xz
FRAGMENT=$REPO/scripts/debug-kernel.config
CACHE_ROOT=${SRNIC_DEBUG_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/srnic}
MODULE_BUILD=$REPO/build/debug-kernel/module

die() {
	echo "debug-kernel: $*" >&2
	exit 1
}
say() { echo "debug-kernel: $*" >&2; }

# cache_dir: the dir of the kernel built from the current source package and fragment.
cache_dir() {
	local ver key
	[ -r "$SOURCE_TAR" ] || die "$SOURCE_TAR missing: apt-get install $SOURCE_PKG (scripts/setup-deps.sh)"
	ver=$(dpkg-query -W -f '${Version}' "$SOURCE_PKG" 2>/dev/null) ||
		ver=$(stat -c '%s %Y' "$SOURCE_TAR")
	key=$({
		echo "recipe $DEBUG_KERNEL_RECIPE"
		echo "source $SOURCE_PKG $ver"
		${CC:-gcc} --version | head -n 1
		grep -v '^[[:space:]]*#\{0,1\}[[:space:]]*$' "$FRAGMENT"
	} | sha256sum | cut -c 1-12)
	echo "$CACHE_ROOT/debug-kernel-$key"
}

# check_config DIR: every CONFIG_X=y/m and "is not set" line of the fragment must hold in the
# final .config (a dependency that is not met makes olddefconfig drop an option silently).
check_config() {
	local cfg=$1/src/.config bad=0 line name want
	while read -r line; do
		case "$line" in
		CONFIG_*=*) name=${line%%=*} want=$line ;;
		"# CONFIG_"*" is not set") name=${line#\# } name=${name%% *} want=$line ;;
		*) continue ;;
		esac
		if ! grep -qxF -- "$want" "$cfg"; then
			# "is not set" also holds when the option is absent altogether.
			if [[ "$want" == "# "* ]] && ! grep -q "^$name=" "$cfg"; then continue; fi
			echo "  wanted: $want; got: $(grep -E "^$name=|^# $name is not set" "$cfg" || echo absent)" >&2
			bad=1
		fi
	done <"$FRAGMENT"
	[ "$bad" = 0 ] || die "the configuration lost options of $FRAGMENT (see above)"
}

# build: configure and build the kernel and its modules into the cache dir, unless done.
build() {
	local dir src start end jobs
	dir=$(cache_dir)
	if [ -f "$dir/complete" ]; then
		echo "$dir"
		return 0
	fi
	mkdir -p "$dir"
	exec 9>"$dir/lock"
	flock -n 9 || { say "another build of $dir is running; waiting"; flock 9; }
	if [ -f "$dir/complete" ]; then
		echo "$dir"
		return 0
	fi
	src=$dir/src
	jobs=${SRNIC_DEBUG_KERNEL_JOBS:-$(nproc)}
	start=$(date +%s)
	say "building in $dir (log: $dir/build.log); this takes a while"
	{
		if [ ! -f "$src/Makefile" ]; then
			rm -rf "$src" "$dir/src.tmp"
			mkdir -p "$dir/src.tmp"
			echo "== unpacking $SOURCE_TAR"
			tar -C "$dir/src.tmp" -xJf "$SOURCE_TAR"
			mv "$dir/src.tmp/$SOURCE_PKG" "$src"
			rmdir "$dir/src.tmp"
		fi
		echo "== configuring"
		make -C "$src" -s x86_64_defconfig
		(cd "$src" && scripts/kconfig/merge_config.sh -m .config "$FRAGMENT")
		make -C "$src" -s olddefconfig
	} >>"$dir/build.log" 2>&1 || die "unpacking or configuring failed; see $dir/build.log"
	check_config "$dir"
	echo "== building with $jobs jobs" >>"$dir/build.log"
	nice -n 19 make -C "$src" -j"$jobs" bzImage modules >>"$dir/build.log" 2>&1 ||
		die "kernel build failed; see the end of $dir/build.log"
	rm -rf "$dir/modroot"
	make -C "$src" -s INSTALL_MOD_PATH="$dir/modroot" modules_install >>"$dir/build.log" 2>&1 ||
		die "modules_install failed; see $dir/build.log"
	make -C "$src" -s kernelrelease >"$dir/release"
	cp "$src/arch/x86/boot/bzImage" "$dir/bzImage"
	end=$(date +%s)
	echo "$((end - start))" >"$dir/build-seconds"
	touch "$dir/complete"
	say "built $(cat "$dir/release") in $(((end - start) / 60)) min $(((end - start) % 60)) s"
	echo "$dir"
}

# built_dir: the cache dir, which must hold a finished build.
built_dir() {
	local dir
	dir=$(cache_dir)
	[ -f "$dir/complete" ] || die "no debug kernel in $dir: run scripts/debug-kernel.sh build (make debug-kernel)"
	echo "$dir"
}

# module: srnic.ko against the debug kernel, in a copy of the sources.
module() {
	local dir
	dir=$(built_dir)
	mkdir -p "$MODULE_BUILD"
	rsync -a --delete --exclude '*.o' --exclude '*.cmd' --exclude '*.mod*' --exclude '*.ko' \
		--exclude 'modules.order' --exclude 'Module.symvers' \
		"$REPO/Kbuild" "$REPO/kernel" "$MODULE_BUILD/" 2>/dev/null ||
		{ cp "$REPO/Kbuild" "$MODULE_BUILD/" && cp -r "$REPO/kernel" "$MODULE_BUILD/"; }
	make -C "$dir/src" M="$MODULE_BUILD" SRNIC_TEST_MODULE=y KCFLAGS=-g modules >&2 ||
		die "srnic.ko does not build against the debug kernel"
	echo "$MODULE_BUILD/srnic.ko"
}

# vm_env: export what scripts/vm-run needs to boot the debug kernel.
vm_env() {
	local dir
	dir=$(built_dir)
	export SRNIC_VM_KERNEL=$dir/bzImage
	SRNIC_VM_KVER=$(cat "$dir/release")
	export SRNIC_VM_KVER
	export SRNIC_VM_MODULES=$dir/modroot
	export SRNIC_VM_MODULE=$MODULE_BUILD/srnic.ko
	export SRNIC_VM_KMEMLEAK=1
	# ACPI's AML interpreter under KASAN + lockdep + TCG is so slow that QEMU's _PRT method hits
	# ACPICA's 30 s loop timeout, five times per boot: route PCI interrupts without ACPI.
	# no5lvl: 4-level paging, although QEMU's "-cpu max" offers LA57. With 5-level paging, this
	# kernel's KASAN decides whether an address has shadow from pgtable_l5_enabled(), which reads
	# X86_FEATURE_LA57 in boot_cpu_data until alternatives are patched; identify_cpu() zeroes
	# those bits (and get_cpu_cap() sets them again) with interrupts already on, so an interrupt
	# in that window takes the 5-level direct map (0xff11...) for an address without shadow: a
	# "wild-memory-access" KASAN report in handle_edge_irq at 0.002 s of boot
	# (Documentation/reliability.rst, "Debug kernel"). 4-level paging has no such window.
	# (no_timer_check, which this VM needs as much as any, is scripts/vm-run's own.)
	export SRNIC_VM_APPEND="pci=noacpi no5lvl${SRNIC_VM_APPEND:+ $SRNIC_VM_APPEND}"
	# The PVH entry of this kernel triple-faults at once (KASAN): boot the bzImage.
	export SRNIC_VM_PVH=${SRNIC_VM_PVH:-0}
}

check() {
	local -a suites=("$@")
	local rc=0 log name bad=()
	if [ ${#suites[@]} -eq 0 ]; then
		mapfile -t suites < <(cd "$REPO" && ls tests/test_*.py)
	fi
	# Without it the guest registers no provider and every verbs program fails to find srnic0
	# ("make debug-check" builds it first).
	compgen -G "$REPO/build/userspace/libsrnic-rdmav*.so" >/dev/null ||
		die "no provider in $REPO/build/userspace: run make provider (or make debug-check)"
	vm_env
	# KASAN, lockdep and kmemleak under TCG: everything takes a few times longer.
	export SRNIC_VM_SUITE_TIMEOUT=${SRNIC_VM_SUITE_TIMEOUT:-3600} SRNIC_VM_GROUP=1
	export PYTEST_ADDOPTS=${PYTEST_ADDOPTS:---timeout=1200}
	export SRNIC_TEST_WC_TIMEOUT=${SRNIC_TEST_WC_TIMEOUT:-30}
	export SRNIC_TEST_TOOL_TIMEOUT=${SRNIC_TEST_TOOL_TIMEOUT:-240}
	# 4.096 us * 2^15 = 134 ms: a large READ's round trip under KASAN + TCG.
	export SRNIC_STRESS_ACK_TIMEOUT=${SRNIC_STRESS_ACK_TIMEOUT:-15}
	# test_teardown's peers: 4.096 us * 2^16 = 268 ms, a vanished peer an error after ~4 s
	# (15 timeouts: 3 retries, doubled) rather than ~1 s; its waits scale with it.
	export SRNIC_TEST_ACK_TIMEOUT=${SRNIC_TEST_ACK_TIMEOUT:-16}
	say "kernel $SRNIC_VM_KERNEL ($SRNIC_VM_KVER), suites: ${suites[*]}"
	(cd "$REPO" && scripts/run-vm-suites.sh "${suites[@]}") || rc=1
	# vm-run already failed every suite whose log has a report; list them once more, together.
	for s in "${suites[@]}"; do
		name=$(basename "$s" .py)
		log=$REPO/build/vm/$name.console.log
		[ -f "$log" ] || continue
		if ! "$REPO/scripts/vm-console-check.sh" "$log" >/dev/null; then
			bad+=("$log")
		fi
	done
	if [ ${#bad[@]} -gt 0 ]; then
		say "kernel reports (KASAN, lockdep, kmemleak, ...) in: ${bad[*]}"
		rc=1
	fi
	[ "$rc" = 0 ] && say "PASS: ${#suites[@]} suite(s) under $SRNIC_VM_KVER, no kernel report"
	return "$rc"
}

cmd=${1:-build}
[ $# -eq 0 ] || shift
case "$cmd" in
build) build ;;
dir) cache_dir ;;
module) module ;;
check)
	build >/dev/null
	module >/dev/null
	check "$@"
	;;
vm-run)
	build >/dev/null
	module >/dev/null
	vm_env
	exec "$REPO/scripts/vm-run" "$@"
	;;
-h | --help) sed -n '4,/^set -euo/{/^#/!d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" ;;
*) die "unknown command $cmd (build, dir, module, check, vm-run; see --help)" ;;
esac
