#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# srnic's benchmark (`make bench`, issue 5): in one VM boot, perftest on one
# srnic device and on one rxe device, perftest between two srnic devices over
# the wire (two netns joined by a veth pair), the VM's memcpy bandwidth, and
# syscalls per post per driver, CPU cost per GB, per message and idle, the
# kernel's NVMe over RDMA on one device (file and null_blk namespaces)
# and between two kernels (two VMs on a wire). Prints one table and writes it to
# build/bench/results.txt, with build/bench/results.json next to it.
# Documentation/performance.rst says what each line means.
#
# Usage: scripts/bench.sh [--platform NAME] [--timeout SECS]
#   --platform NAME the platform (scripts/platforms.conf, default bookworm):
#                   its VM, its srnic build and its kernel's rxe; results in
#                   build/bench for bookworm, build/bench/NAME for the others
#   --timeout SECS  the VM's (default 1500, SRNIC_BENCH_TIMEOUT); the guest
#                   stops starting runs when it would overrun it
# Environment: SRNIC_BENCH_TOOL_TIMEOUT (seconds per tool run, default 60),
# SRNIC_BENCH_REPEAT (rounds over the perftest lines, median kept, default 1),
# SRNIC_BENCH_ITERS_BW_4K, SRNIC_BENCH_ITERS_BW_64K, SRNIC_BENCH_ITERS_LAT
# (perftest -n, defaults 2000, 5000, 1000), SRNIC_BENCH_ONLY (a comma list of
# tools or tool:size, e.g. ib_write_lat,ib_write_bw:65536: only those lines),
# SRNIC_BENCH_MTU (every veth's MTU, default 9000: RoCE path MTU 4096),
# SRNIC_BENCH_SECTIONS (a comma list of memcpy, perftest, syscalls, cpu,
# nvme: only those parts of the one-VM run), SRNIC_BENCH_TWO_KERNELS=0 (no
# two-kernel run), SRNIC_BENCH_QPERF_SECONDS (qperf rc_lat's -t, default 5),
# SRNIC_BENCH_NVME_SECONDS (each NVMe fio run's length, default 15),
# SRNIC_BENCH_NVME_ROUNDS (rounds of the one-device NVMe lines, median kept,
# default 3).
#
# Needs srnic.ko and the provider built (`make`). Everything in build/bench
# is made afresh by each run. Exit status: 0 when every line was measured,
# 1 when a line FAILED or the VM run failed (the table is printed anyway).
set -uo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
cd "$REPO" || exit 2
out=$REPO/build/bench
platform=bookworm
timeout=${SRNIC_BENCH_TIMEOUT:-1500}

while [ $# -gt 0 ]; do
	case $1 in
	--timeout)
		timeout=${2:?--timeout needs SECS}
		shift 2
		;;
	--platform)
		platform=${2:?--platform needs a NAME}
		scripts/platform check "$platform" || exit 2
		[ "$platform" = bookworm ] || out=$REPO/build/bench/$platform
		shift 2
		;;
	-h | --help)
		sed -n '3,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"
		exit 0
		;;
	*)
		echo "bench.sh: unknown argument $1 (see --help)" >&2
		exit 2
		;;
	esac
done

for f in "$(scripts/platform module "$platform")" \
	"$(scripts/platform provider-dir "$platform")"/libsrnic-rdmav*.so; do
	if [ ! -f "$f" ]; then
		echo "bench.sh: $f is missing: run make PLATFORM=$platform first (make bench does)" >&2
		exit 2
	fi
done

# One bench at a time per clone: a second one would delete the first's
# results under it.
mkdir -p "$REPO/build"
exec 9>"$REPO/build/.bench.lock"
if ! flock -n 9; then
	echo "bench.sh: another bench runs in this clone ($REPO/build/.bench.lock)" >&2
	exit 2
fi
# Afresh, but the primary platform's build/bench keeps the others' results
# (build/bench/NAME) under it.
mkdir -p "$out"
spare=()
for p in $(scripts/platform names); do
	spare+=(! -name "$p")
done
find "$out" -mindepth 1 -maxdepth 1 "${spare[@]}" -exec rm -rf {} +
cc -O2 -Wall -Wextra -fno-tree-loop-distribute-patterns -o "$out/memcpy-bw" \
	scripts/memcpy-bw.c || exit 2

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	commit="$commit (with uncommitted changes)"
fi
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_start=$(load)

pass_env=()
for var in SRNIC_BENCH_TOOL_TIMEOUT SRNIC_BENCH_REPEAT SRNIC_BENCH_ITERS_BW_4K \
	SRNIC_BENCH_ITERS_BW_64K SRNIC_BENCH_ITERS_LAT SRNIC_BENCH_ONLY \
	SRNIC_BENCH_MTU SRNIC_BENCH_SECTIONS SRNIC_BENCH_QPERF_SECONDS \
	SRNIC_BENCH_ITERS_CPU_GB SRNIC_BENCH_ITERS_CPU_MSGS SRNIC_BENCH_IDLE_SECONDS \
	SRNIC_BENCH_LOSS_SECONDS SRNIC_BENCH_NVME_SECONDS SRNIC_BENCH_NVME_ROUNDS \
	SRNIC_BENCH_INCAST_SECONDS SRNIC_BENCH_INCAST_MBIT SRNIC_BENCH_INCAST_AQM \
	SRNIC_BENCH_QPSCALE_PAIRS SRNIC_BENCH_QPSCALE_QPS; do
	if [ -n "${!var:-}" ]; then
		pass_env+=(--env "$var=${!var}")
	fi
done

start=$SECONDS
scripts/vm-run --platform "$platform" --timeout "$timeout" --results "$out" \
	--log "$out/console.log" \
	--env PYTHONUNBUFFERED=1 \
	--env "SRNIC_BENCH_COMMIT=$commit" \
	--env "SRNIC_BENCH_PLATFORM=$(scripts/platform version-line "$platform")" \
	--env "SRNIC_BENCH_DATE=$(date -u '+%Y-%m-%d %H:%M UTC')" \
	--env "SRNIC_BENCH_HOST_LOAD=$load_start" \
	--env "SRNIC_BENCH_BUDGET=$((timeout - 90))" \
	${pass_env[@]+"${pass_env[@]}"} \
	-- /usr/bin/python3 scripts/bench.py run "$out"
vm_status=$?

# NVMe over RDMA between two kernels: a second run, in two VMs on one wire
# (scripts/vm-run --peer; SRNIC_BENCH_TWO_KERNELS=0 leaves it out).
if [ "${SRNIC_BENCH_TWO_KERNELS:-1}" = 1 ]; then
	scripts/vm-run --platform "$platform" --peer --timeout 900 --results "$out" \
		--log "$out/console-two-kernels.log" --env PYTHONUNBUFFERED=1 \
		${pass_env[@]+"${pass_env[@]}"} \
		-- /usr/bin/python3 scripts/bench.py two-kernels "$out" || vm_status=$?
fi

echo
/usr/bin/python3 scripts/bench.py report "$out" "$vm_status" "$(load)"
status=$?
echo
echo "bench: $((SECONDS - start)) s; table in $out/results.txt, JSON in" \
	"$out/results.json, tool logs in $out/logs"
exit "$status"
