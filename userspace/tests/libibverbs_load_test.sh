#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# End to end through the installed libibverbs, without a kernel module:
# ibv_devices loads the built provider through a .driver file, enumerates a
# fake sysfs (SYSFS_PATH), and srnic must claim exactly the device carrying
# srnic_abi_version = SRNIC_ABI_VERSION, whatever its name.
#
# libibverbs only loads providers once it has found a device, and it wants a
# /dev/infiniband/<uverbsN> node for each; both the node and the .driver file
# are created in a private mount namespace, so nothing on the host changes.
# Skips (exit 77) when it cannot make that namespace (not root, no unshare).
#
# usage: libibverbs_load_test.sh <path to libsrnic-rdmav<ABI>.so> <SRNIC_ABI_VERSION>
set -eu

provider=$(realpath "$1")
abi=$2
skip=77

command -v ibv_devices >/dev/null || { echo "SKIP: ibv_devices not installed"; exit $skip; }
command -v unshare >/dev/null || { echo "SKIP: unshare not installed"; exit $skip; }
unshare -m --propagation private true 2>/dev/null ||
	{ echo "SKIP: cannot create a mount namespace"; exit $skip; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sys=$work/sys

# add_device <uverbsN> <ibdev name> <minor> [<srnic_abi_version contents>]
add_device() {
	mkdir -p "$sys/class/infiniband_verbs/$1" "$sys/class/infiniband/$2"
	echo "$2" >"$sys/class/infiniband_verbs/$1/ibdev"
	echo "231:$3" >"$sys/class/infiniband_verbs/$1/dev"
	echo "$abi" >"$sys/class/infiniband_verbs/$1/abi_version"
	echo "1: CA" >"$sys/class/infiniband/$2/node_type"
	echo "0002:c903:0000:00$3" >"$sys/class/infiniband/$2/node_guid"
	if [ $# -ge 4 ]; then
		echo "$4" >"$sys/class/infiniband/$2/srnic_abi_version"
	fi
}
mkdir -p "$sys/class/infiniband_verbs"
echo 6 >"$sys/class/infiniband_verbs/abi_version"
add_device uverbs0 my-nic_0 10 "$abi"
add_device uverbs1 other_vendor0 11
add_device uverbs2 srnic_old 12 "$((abi + 1))"
add_device uverbs3 srnic_garbage 13 "x$abi"

# A sanitizer build of the provider needs its runtimes loaded first.
preload=$(ldd "$provider" | awk '/lib(asan|ubsan)\.so/ { printf "%s:", $3 }')

# list_devices <with driver file: yes|no> <stdout file> <stderr file>
list_devices() {
	unshare -m --propagation private sh -c '
		set -e
		mount -t tmpfs srnic-test-dev /dev
		mkdir /dev/infiniband
		touch /dev/infiniband/uverbs0 /dev/infiniband/uverbs1 \
			/dev/infiniband/uverbs2 /dev/infiniband/uverbs3
		mount -t tmpfs srnic-test-etc /etc/libibverbs.d
		if [ "$1" = yes ]; then
			echo "driver ${2%-rdmav*.so}" >/etc/libibverbs.d/srnic.driver
		fi
		SYSFS_PATH="$3" IBV_SHOW_WARNINGS=1 LD_PRELOAD="$4" ibv_devices >"$5" 2>"$6"
	' list_devices "$1" "$provider" "$sys" "$preload" "$2" "$3"
}

fail() {
	echo "FAIL: $*"
	echo "--- stdout"; cat "$work/out"
	echo "--- stderr"; cat "$work/err"
	exit 1
}

list_devices no "$work/out" "$work/err" || fail "ibv_devices failed"
grep -q my-nic_0 "$work/out" && fail "my-nic_0 listed without the srnic provider"

list_devices yes "$work/out" "$work/err" || fail "ibv_devices failed"
grep -q "couldn't load driver" "$work/err" && fail "libibverbs could not load the provider"
grep -q "^[[:space:]]*my-nic_0[[:space:]]*0002c90300000010$" "$work/out" || fail "srnic did not claim my-nic_0"
for other in other_vendor0 srnic_old srnic_garbage; do
	grep -q "$other" "$work/out" && fail "srnic claimed $other"
done
grep -q "srnic_old speaks srnic ABI $((abi + 1))" "$work/err" ||
	fail "no warning for the device of another srnic ABI"
grep -q "ERROR: AddressSanitizer\|runtime error" "$work/err" && fail "sanitizer report"

echo "PASS: libibverbs loaded the provider, which claimed my-nic_0 only"
