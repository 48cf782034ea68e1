#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Run modules of rdma-core's own pyverbs test suite (the outside judge) against
# an srnic device inside the VM, each module in its own process, and print
# unittest's summary line per module.
#
# Usage: scripts/rdma-core-tests.sh [--compare] [test_cq test_qp ...]
#
# On the host it copies Debian's /usr/share/doc/rdma-core/tests (some files
# gzipped) into build/rdma-tests (not /tmp: the guest's /tmp is empty), then
# boots the VM, creates srnic0 on a veth end with 198.18.0.1/24 and runs
# tests/run_tests.py --dev srnic0 --gid <its RoCE v2 IPv4 GID index>; full
# logs go to build/vm/results/rdma-core-<module>.log.
#
# --compare (scripts/rdma-core-compare.sh): in ONE VM boot, run the modules
# (default: the 19 generic ones, GENERIC_MODULES) against srnic0 and against
# rxe0, the kernel's soft-RoCE: rdma_rxe binds UDP 4791 in init_net, so rxe0
# is on a veth end in init_net (198.18.1.1) and srnic0 on a veth end in the
# netns rcsrnic (198.18.0.1), its modules run inside that netns (rdma_cm and
# the suite's IP lookups see only the process's netns). Logs go to
# build/vm/results/rdma-core-<kind>-<module>.log; the table (module x kind x
# ran/passed/skipped/failed/errors, totals, and the failing tests) is
# printed and written to build/rdma-core-compare.txt by
# scripts/rdma_core_table.py. The exit status is the table's: non-zero when
# srnic has a failure or error.
set -euo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
cd "$REPO"
compare=0
if [ "${1:-}" = --compare ]; then
	compare=1
	shift
fi
modules=("$@")
# Default: the modules tests/test_rdma_core.py holds to no failure.
# Every module of rdma-core 44's suite that is not vendor-specific (mlx5,
# efa) and needs no CUDA.
GENERIC_MODULES=(test_addr test_atomic test_cq test_cq_events test_cqex test_device test_fork
	test_mr test_odp test_parent_domain test_pd test_qp test_qpex test_rdmacm
	test_relaxed_ordering test_shared_pd test_tag_matching test_flow test_rss_traffic)
DEFAULT_MODULES=("${GENERIC_MODULES[@]}")
if [ ${#modules[@]} -eq 0 ]; then
	if [ $compare = 1 ]; then
		modules=("${GENERIC_MODULES[@]}")
	else
		modules=("${DEFAULT_MODULES[@]}")
	fi
fi
logs=${SRNIC_RESULTS:-$REPO/build/vm/results}

if [ -z "${SRNIC_VM:-}" ]; then
	rm -rf build/rdma-tests
	mkdir -p build/rdma-tests "$logs"
	cp -r /usr/share/doc/rdma-core/tests build/rdma-tests/tests
	find build/rdma-tests/tests -name '*.gz' -exec gunzip -f {} +
	if [ $compare = 0 ]; then
		exec scripts/vm-run --timeout 900 -- scripts/rdma-core-tests.sh "${modules[@]}"
	fi
	for m in "${modules[@]}"; do
		rm -f "$logs/rdma-core-srnic-$m.log" "$logs/rdma-core-rxe-$m.log"
	done
	status=0
	scripts/vm-run --timeout "${SRNIC_VM_SUITE_TIMEOUT:-3600}" \
		--log "$REPO/build/vm/rdma-core-compare.console.log" -- \
		scripts/rdma-core-tests.sh --compare "${modules[@]}" || status=$?
	/usr/bin/python3 scripts/rdma_core_table.py --logs "$logs" \
		--out build/rdma-core-compare.txt "${modules[@]}" || status=1
	exit $status
fi

# In the guest.

# gid_index DEV IPV4: the index of DEV's RoCE v2 GID for IPV4 (waits for it).
gid_index() {
	local dir=/sys/class/infiniband/$1/ports/1 want f i octets
	IFS=. read -ra octets <<<"$2"
	want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${octets[@]}")
	for _ in $(seq 50); do
		for f in "$dir"/gids/*; do
			i=${f##*/}
			if [ "$(cat "$f")" = "$want" ] &&
			   [ "$(cat "$dir/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ]; then
				echo "$i"
				return 0
			fi
		done
		sleep 0.1
	done
	echo "no RoCE v2 GID for $2 on $1" >&2
	return 1
}

# run_module KIND DEV GID LOG MODULE [NETNS]
run_module() {
	local kind=$1 dev=$2 gid=$3 log=$4 m=$5 ns=${6:-} pre=()
	[ -z "$ns" ] || pre=(ip netns exec "$ns")
	echo "=== $kind $m"
	local rc=0
	timeout 900 "${pre[@]}" /usr/bin/python3 tests/run_tests.py --dev "$dev" --gid "$gid" \
		-v "tests.$m" > "$log" 2>&1 || rc=$?
	grep -E '^(ERROR|FAIL):|^Ran |^OK|^FAILED' "$log" || tail -5 "$log"
	return $rc
}

ip link add srt0 type veth peer name srt1
if [ $compare = 0 ]; then
	ip link set srt0 up
	ip link set srt1 up
	ip addr add 198.18.0.1/24 dev srt0
	modprobe srnic
	rdma link add srnic0 type srnic netdev srt0
	gid=$(gid_index srnic0 198.18.0.1)
	cd build/rdma-tests
	status=0
	for m in "${modules[@]}"; do
		run_module srnic srnic0 "$gid" "$logs/rdma-core-$m.log" "$m" || status=1
	done
	exit $status
fi

# --compare: srnic0 in netns rcsrnic, rxe0 in init_net, both up at once.
ns=rcsrnic
ip netns add $ns
ip link set srt0 netns $ns
ip link set srt1 netns $ns
ip -n $ns link set lo up
ip -n $ns link set srt0 up
ip -n $ns link set srt1 up
ip -n $ns addr add 198.18.0.1/24 dev srt0
ip link add rxt0 type veth peer name rxt1
ip link set rxt0 up
ip link set rxt1 up
ip addr add 198.18.1.1/24 dev rxt0
modprobe srnic
modprobe rdma_rxe
ip netns exec $ns rdma link add srnic0 type srnic netdev srt0
rdma link add rxe0 type rxe netdev rxt0
srnic_gid=$(gid_index srnic0 198.18.0.1)
rxe_gid=$(gid_index rxe0 198.18.1.1)
cd build/rdma-tests
for m in "${modules[@]}"; do
	run_module srnic srnic0 "$srnic_gid" "$logs/rdma-core-srnic-$m.log" "$m" $ns || true
	run_module rxe rxe0 "$rxe_gid" "$logs/rdma-core-rxe-$m.log" "$m" || true
done
exit 0
