#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# srnic VM, stage 2: PID 1 of the guest started by scripts/vm-run, exec'ed by the initramfs
# (stage 1, in scripts/vm-lib.sh) after switch_root into the overlay root. Not for use on a host.
#
# Usage: vm-guest-init.sh CTLDIR
#   CTLDIR (9p share of the host's build/vm/run.*) holds env, argv (NUL-separated) and user-env
#   (NUL-separated NAME=VALUE) from vm-run, and modules/ if a module is to be installed. This
#   script writes CTLDIR/started just before the command runs and CTLDIR/status (its exit status)
#   when it ends, then powers the guest off.
#
# Stage 1 already mounted /proc, /sys, /dev (+ pts, shm, mqueue), fresh tmpfs on /tmp and /run,
# debugfs, configfs and cgroup2, set lo up and the hostname: with its static busybox that is
# much faster than here, where each exec of a dynamically linked program costs 0.1-0.5 s under
# TCG. So this script uses bash builtins wherever it can and runs few programs.
#
# No `set -e`: whatever fails here, the guest must still power off; vm-run reports a missing
# status as a failure.
set -uo pipefail

ctl=${1:?usage: vm-guest-init.sh CTLDIR}
# shellcheck source=/dev/null
. "$ctl/env" # SRNIC_VM_REPO, SRNIC_VM_RESULTS, SRNIC_VM_NICS, SRNIC_VM_TERM

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() {
	local up _
	read -r up _ </proc/uptime
	echo "srnic-vm: [$up] $*" >/dev/console
}

# shellcheck disable=SC2317  # called from the EXIT trap
power_off() {
	sync
	# The kernel's own power-off: the same on every root (a debootstrap minbase root has no
	# poweroff binary) and no program to start.
	if [ -w /proc/sysrq-trigger ]; then
		echo o >/proc/sysrq-trigger
	else
		poweroff -f
	fi
	# The power-off runs asynchronously and tears down the 9p root under us: from here on no
	# program can be exec'ed (sleep would fail with EIO), and returning would end PID 1 and panic
	# the kernel. Wait with builtins only.
	while :; do
		read -r -t 5 _ </dev/console
	done
}
# PID 1 must never exit (the kernel would panic): any path out of this script powers off.
trap power_off EXIT

say "stage 2 running"

# --- 2 MiB huge pages for the huge-page ODP tests (rdma-core's test_odp, tests/test_odp.py):
# reserved now, while memory is not yet fragmented. 16 (32 MiB of the guest's 3G) serve two
# MRs per test with room to spare. A kernel without hugetlbfs has no such file: not fatal.
if [ -w /proc/sys/vm/nr_hugepages ]; then
	echo 16 >/proc/sys/vm/nr_hugepages
	read -r huge </proc/sys/vm/nr_hugepages
	say "huge pages reserved: $huge"
fi

# --- The freshly built module (srnic.ko), installed so that `modprobe srnic` and the kernel's
# autoload (`rdma link add X type srnic` asks for the alias rdma-link-srnic) find it. vm-run
# checked it is built for this kernel and staged it in CTLDIR/modules with module indexes that
# depmod made on the host (depmod -a here takes ~30 s). Not loaded: tests do that.
read -r kver </proc/sys/kernel/osrelease
kdir=/lib/modules/$kver
if [ -d "$ctl/modules$kdir" ]; then
	if cp -r "$ctl/modules$kdir/." "$kdir/"; then
		say "installed $(cd "$kdir" && echo updates/*.ko)"
	else
		say "warning: installing the module from $ctl/modules$kdir failed"
	fi
fi

# --- RDMA core modules, loaded up front so tests start from a ready stack, in the background
# while the rest is set up (after the module install above: modprobe must not read indexes that
# cp is rewriting). Some may be built in or missing on other kernels: not fatal.
modprobe -a ib_core ib_uverbs rdma_ucm rdma_cm veth &
modprobe_pid=$!

echo "127.0.1.1 srnic-vm" >>/etc/hosts

# --- The built userspace provider (libsrnic-rdmav<ABI>.so in SRNIC_VM_PROVIDER_DIR: libibverbs
# appends -rdmav<ABI>.so to the .driver file's path). Registered only when it exists: a .driver
# file naming a missing library makes every verbs program print a warning.
for provider in "${SRNIC_VM_PROVIDER_DIR:-none}"/libsrnic-rdmav*.so; do
	[ -f "$provider" ] || continue
	[ -d /etc/libibverbs.d ] || mkdir -p /etc/libibverbs.d
	echo "driver ${provider%-rdmav*.so}" >/etc/libibverbs.d/srnic.driver
done

# --- The command's output channels: virtio-serial ports named by vm-run (virtio_console was
# loaded by stage 1). Fall back to the console if they are missing.
port_dev() {
	local d name
	for d in /sys/class/virtio-ports/*; do
		read -r name <"$d/name" 2>/dev/null || continue
		if [ "$name" = "$1" ] && [ -c "/dev/${d##*/}" ]; then
			echo "/dev/${d##*/}"
			return 0
		fi
	done
	return 1
}
if ! out=$(port_dev srnic.stdout) || ! err=$(port_dev srnic.stderr); then
	say "warning: virtio-serial ports missing; command output goes to the console"
	out=/dev/console err=/dev/console
fi

wait "$modprobe_pid" || say "warning: some RDMA modules failed to load (modprobe -a: $?)"

# --- kmemleak: what boot left behind is not the command's: report it, then forget it (clear),
# so that the scan after the command shows only new leaks.
kmemleak_file=/sys/kernel/debug/kmemleak
if [ "${SRNIC_VM_KMEMLEAK:-0}" = 1 ]; then
	if [ -w "$kmemleak_file" ]; then
		echo scan >"$kmemleak_file"
		boot_leaks=$(<"$kmemleak_file")
		[ -z "$boot_leaks" ] ||
			say "kmemleak: ignoring $(grep -c '^unreferenced object' <<<"$boot_leaks") object(s) reported before the command"
		echo clear >"$kmemleak_file"
		say "kmemleak: cleared"
	else
		say "warning: --kmemleak, but this kernel has no $kmemleak_file"
	fi
fi

# --- Run the command: clean environment, repo root as cwd, stdin from /dev/null.
mapfile -d '' -t argv <"$ctl/argv"
mapfile -d '' -t user_env <"$ctl/user-env"
cd "$SRNIC_VM_REPO" || exit
say "running: ${argv[*]}"
: >"$ctl/started"
(
	# A clean environment without exec'ing env(1): drop every exported variable, set ours.
	guest_path=$PATH
	while read -r name; do unset "$name" 2>/dev/null; done < <(compgen -e)
	export PATH="$guest_path" HOME=/root USER=root LOGNAME=root SHELL=/bin/bash LANG=C.UTF-8
	export TERM="$SRNIC_VM_TERM" SRNIC_VM=1 SRNIC_RESULTS="$SRNIC_VM_RESULTS"
	export SRNIC_REPO="$SRNIC_VM_REPO"
	for e in "${user_env[@]}"; do export "${e?}"; done
	trap - EXIT
	exec "${argv[@]}" </dev/null >"$out" 2>"$err"
)
rc=$?
say "command exited with status $rc"

# Leftover background processes would keep writing after the status is out: end them.
kill -KILL -1 2>/dev/null

# --- kmemleak (vm-run --kmemleak, a kernel built with it): unload srnic so that what it leaked
# has nothing left pointing at it, scan, and print the report to the console, where
# scripts/vm-console-check.sh fails the run on it ("unreferenced object").
if [ "${SRNIC_VM_KMEMLEAK:-0}" = 1 ] && [ -w "$kmemleak_file" ]; then
	modprobe -r srnic 2>/dev/null || say "kmemleak: srnic stays loaded (modprobe -r failed)"
	say "kmemleak: scanning"
	echo scan >"$kmemleak_file"
	leaks=$(<"$kmemleak_file")
	if [ -n "$leaks" ]; then
		say "kmemleak: suspected leaks after the command:"
		echo "$leaks" >/dev/console
	else
		say "kmemleak: no leak found"
	fi
fi
if [ -r /proc/lockdep_stats ]; then
	while read -r line; do
		case "$line" in
		"debug_locks:"*) say "lockdep: $line (0: lockdep turned itself off)" ;;
		esac
	done </proc/lockdep_stats
fi

echo "$rc" >"$ctl/status"
exit 0 # the EXIT trap powers off
