#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Run modules of rdma-core's own pyverbs test suite (the outside judge) against
# an srnic device inside the VM, each module in its own process, and print
# unittest's summary line per module.
#
# Usage: scripts/rdma-core-tests.sh [test_cq test_qp ...]   (default below)
#
# On the host it copies Debian's /usr/share/doc/rdma-core/tests (some files
# gzipped) into build/rdma-tests (not /tmp: the guest's /tmp is empty), then
# boots the VM, creates srnic0 on a veth end with 198.18.0.1/24 and runs
# tests/run_tests.py --dev srnic0 --gid <its RoCE v2 IPv4 GID index>; full
# logs go to build/vm/results/rdma-core-<module>.log.
set -euo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
cd "$REPO"
modules=("$@")
# Default: the modules tests/test_rdma_core.py holds to no failure.
[ ${#modules[@]} -gt 0 ] ||
	modules=(test_device test_pd test_mr test_cq test_cq_events test_cqex test_qp test_qpex
		test_addr test_atomic)

if [ -z "${SRNIC_VM:-}" ]; then
	rm -rf build/rdma-tests
	mkdir -p build/rdma-tests
	cp -r /usr/share/doc/rdma-core/tests build/rdma-tests/tests
	find build/rdma-tests/tests -name '*.gz' -exec gunzip -f {} +
	exec scripts/vm-run --timeout 900 -- scripts/rdma-core-tests.sh "${modules[@]}"
fi

# In the guest.
ip link add srt0 type veth peer name srt1
ip link set srt0 up
ip link set srt1 up
ip addr add 198.18.0.1/24 dev srt0
modprobe srnic
rdma link add srnic0 type srnic netdev srt0
gid_dir=/sys/class/infiniband/srnic0/ports/1
gid=
for _ in $(seq 50); do
	for f in "$gid_dir"/gids/*; do
		i=${f##*/}
		if [ "$(cat "$f")" = "0000:0000:0000:0000:0000:ffff:c612:0001" ] &&
		   [ "$(cat "$gid_dir/gid_attrs/types/$i")" = "RoCE v2" ]; then
			gid=$i
		fi
	done
	[ -n "$gid" ] && break
	sleep 0.1
done
[ -n "$gid" ] || { echo "no RoCE v2 GID for 198.18.0.1" >&2; exit 1; }

# Full logs survive the VM in the results dir (build/vm/results).
logs=${SRNIC_RESULTS:-$REPO/build/vm/results}
cd build/rdma-tests
status=0
for m in "${modules[@]}"; do
	echo "=== $m"
	log=$logs/rdma-core-$m.log
	/usr/bin/python3 tests/run_tests.py --dev srnic0 --gid "$gid" -v "tests.$m" \
		> "$log" 2>&1 || status=1
	grep -E '^(ERROR|FAIL):|^Ran |^OK|^FAILED' "$log" || tail -5 "$log"
done
exit $status
