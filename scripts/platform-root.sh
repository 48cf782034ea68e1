#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# platform-root.sh NAME [--force]: make (or check) the root of platform NAME (scripts/platforms.conf)
# and print its path on the last line.
#
# A root is a Debian system made by debootstrap from Debian's archive, with that release's
# kernel and headers, compilers, rdma-core, pyverbs, perftest, packaging tools and every tool the
# suites use; the VM runner boots it (scripts/vm-run --platform NAME) and builds for it run in it
# (scripts/platform-run). It lives in $SRNIC_ROOTS_DIR/NAME (default ~/.cache/srnic/roots/NAME),
# outside the repo, and is made again when it is missing, when it was made from another package
# list (the recipe hash in /etc/srnic-platform), or with --force. Made once it is never updated
# in place: a newer sid arrives with `--force` (or a fresh machine) and shows as a port to make
# in the build report. The bookworm platform is the host's own root: nothing to make.
#
# Takes 2-5 minutes (debootstrap and apt over the network), ~1.5 GB per root. The root's
# /etc/srnic-platform records the versions it was made with; every run prints them.
set -euo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
# shellcheck source=platform.sh
. "$REPO/scripts/platform.sh"

name=${1:?usage: platform-root.sh NAME [--force]}
force=${2:-}
platform_check "$name"
suite=$(platform_field "$name" 2)
if [ "$suite" = host ]; then
	platform_version_line "$name" >&2
	echo /
	exit 0
fi
MIRROR=${SRNIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# What every root holds. The kernel's initramfs is not needed (the VM boots its own), so the
# kernel package's hook is told to skip it (INITRD=No below).
PACKAGES=(
	linux-image-amd64 linux-headers-amd64
	build-essential cmake pkg-config kmod procps iproute2 strace xz-utils zstd
	rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev rdmacm-utils
	python3-pyverbs python3-pytest python3-pytest-timeout perftest
	libgtest-dev
	# the kernel ULPs' suites (tests/test_nvme_rdma.py, test_nfs_rdma.py, test_iser.py)
	nvme-cli fio nfs-kernel-server python3-rtslib-fb open-iscsi
	# an MPI job across two VMs over srnic (tests/test_mpi_two_kernels.py)
	openmpi-bin libopenmpi-dev libucx0 ucx-utils
	# libfabric's and UCX's own tools over srnic (tests/test_libfabric_ucx.py)
	libfabric-bin
	# make bench: the two kernels' wire measured by itself (scripts/bench.py)
	qperf
	# srnic's tracepoints through the operators' tools (tests/test_trace.py)
	trace-cmd linux-perf
	# capture netdevs read back (tests/test_capture.py)
	tcpdump
	# make deb inside the root, and the install suite's dpkg -i of srnic-dkms in its VM
	debhelper dh-dkms dkms dpkg-dev fakeroot
)
recipe=$( {
	echo "$suite $MIRROR"
	printf '%s\n' "${PACKAGES[@]}"
} | sha256sum | cut -c 1-16)

root=$(platform_root "$name")
if [ -z "$force" ] && [ -f "$root/etc/srnic-platform" ] &&
	grep -qx "RECIPE=$recipe" "$root/etc/srnic-platform"; then
	platform_version_line "$name" >&2
	echo "$root"
	exit 0
fi
[ "$(id -u)" = 0 ] || platform_die "making a root needs root (debootstrap, chroot)"
command -v debootstrap >/dev/null || platform_die "debootstrap missing: run scripts/setup-deps.sh"

start=$(date +%s)
mkdir -p "$SRNIC_ROOTS_DIR"
new=$root.new
rm -rf "$new"
echo "platform-root: making the $name root in $root (debootstrap $suite, a few minutes)" >&2
debootstrap --variant=minbase --components=main "$suite" "$new" "$MIRROR" >"$new.log" 2>&1 || {
	tail -n 30 "$new.log" >&2
	platform_die "debootstrap of $suite failed (log: $new.log)"
}

# apt inside the root: no daemons started, no questions, no recommends. sid's Release file on
# the mirror can be past its Valid-Until: that is the mirror's lag, not an attack on us.
cat >"$new/usr/sbin/policy-rc.d" <<'EOF'
#!/bin/sh
exit 101
EOF
chmod 755 "$new/usr/sbin/policy-rc.d"
{
	echo 'APT::Install-Recommends "false";'
	echo 'APT::Install-Suggests "false";'
	[ "$suite" != sid ] || echo 'Acquire::Check-Valid-Until "false";'
} >"$new/etc/apt/apt.conf.d/99srnic"
echo "deb $MIRROR $suite main" >"$new/etc/apt/sources.list"

in_new() { platform_chroot "$new" -- "$@"; }
pkgs=()
for p in "${PACKAGES[@]}"; do
	[[ "$p" == \#* ]] || pkgs+=("$p")
done
{
	in_new apt-get update -q &&
		in_new apt-get install -y -q "${pkgs[@]}"
} >>"$new.log" 2>&1 || {
	tail -n 30 "$new.log" >&2
	platform_die "installing the packages into the $name root failed (log: $new.log)"
}

# Module indexes now, natively: depmod -a inside a guest over 9p takes ~6 minutes.
kver=$(platform_kernel "$new") || platform_die "the $name root has no kernel in /boot"
in_new depmod -a "$kver" >>"$new.log" 2>&1 || platform_die "depmod in the $name root failed"
in_new apt-get clean >>"$new.log" 2>&1 || true
# The VM's guest init powers off through sysrq and keeps its own hostname.
echo srnic-vm >"$new/etc/hostname"

{
	echo "PLATFORM=$name"
	echo "SUITE=$suite"
	echo "MIRROR=$MIRROR"
	echo "MADE=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "KERNEL=$kver"
	echo "KERNEL_PACKAGE=$(platform_pkg_version "$new" "linux-image-$kver")"
	echo "RDMA_CORE=$(platform_pkg_version "$new" rdma-core)"
	echo "LIBIBVERBS=$(platform_pkg_version "$new" libibverbs1)"
	echo "PYVERBS=$(platform_pkg_version "$new" python3-pyverbs)"
	echo "PERFTEST=$(platform_pkg_version "$new" perftest)"
	echo "GCC=$(platform_pkg_version "$new" gcc)"
	echo "CMAKE=$(platform_pkg_version "$new" cmake)"
	echo "PYTHON=$(platform_pkg_version "$new" python3)"
	echo "DKMS=$(platform_pkg_version "$new" dkms)"
	echo "RECIPE=$recipe"
} >"$new/etc/srnic-platform"

rm -rf "$root"
mv "$new" "$root"
mv "$new.log" "$root.log"
echo "platform-root: $name root made in $(($(date +%s) - start)) s (log: $root.log)" >&2
platform_version_line "$name" >&2
echo "$root"
