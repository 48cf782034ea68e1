#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Install every package srnic's build, VM loop and tests need on a Debian 12 host.
# Safe to run repeatedly: it only calls apt-get when something is missing.
set -euo pipefail

packages=(
	build-essential cmake pkg-config kmod
	linux-headers-amd64 linux-image-amd64
	qemu-system-x86 busybox-static cpio xz-utils zstd
	rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev
	rdmacm-utils python3-pyverbs python3-pytest perftest iproute2
	python3-pytest-timeout googletest libgtest-dev strace linux-source-6.1
	clang libclang-rt-dev
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
	# platform roots (scripts/platform-root.sh) and packages (make deb)
	debootstrap dpkg-dev debhelper dh-dkms dkms fakeroot
	# scripts/debug-kernel.sh: building a kernel from linux-source-6.1
	bc bison flex libelf-dev libssl-dev rsync
)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
	echo "setup-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The VM boots the newest installed Debian kernel; its headers must match.
kver=$(scripts/kernel-version.sh)
if [ ! -d "/lib/modules/$kver/build" ]; then
	echo "setup-deps: installing headers for $kver"
	apt-get install -y -q --no-install-recommends "linux-headers-$kver"
fi
