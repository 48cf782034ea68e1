#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# check.sh: what `make check` (README's test command, CI's .ci/run) runs:
#
#   1. every test on the primary platform (what make check-platform PLATFORM=bookworm runs),
#      each topology-parametrised suite on the topologies whose paths differ for it
#      (SRNIC_TEST_MATRIX=check, tests/topology.py) and rdma-core's suite against srnic only;
#   2. for each other platform: its builds, unit tests and packages, the VM suites of what
#      differs there (PLATFORM_SUITES on PLATFORM_TOPOLOGIES; rdma-core's suite against srnic
#      only, its rxe side is make check PLATFORM=NAME's), and the packages' install test.
#
# Two VMs at a time, of one vCPU each (SRNIC_VM_LANES=2, scripts/run-vm-suites.sh): a guest
# running the suites keeps about 1.1 of the 2 cores busy, and two one-vCPU guests side by side
# take about as long each as one two-vCPU guest alone (two two-vCPU guests slow each other 2 to
# 3 times). The suites about races between CPUs ("# srnic-vm-run: --smp 2") and those that boot
# a peer VM run alone. What needs no VM (the primary's unit tests, checkpatch, fuzzing and
# packages; the other platforms' roots, builds, unit tests and packages) runs beside the
# primary's VM suites at nice 19, on the CPU time the guests leave idle, and its log is
# printed when the VM suites are done. The full matrix (every topology, rdma-core's suite
# against rxe too) is make check PLATFORM=NAME's and make check-all's. Every stage runs even
# when one before it failed; the summary lists each stage with its time and status, and each
# platform's versions. Exit status 0 when every stage passed.
set -uo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
cd "$REPO" || exit 2
make=${MAKE:-make}
start=$(date +%s)
mkdir -p build
summary=()

# stage NAME CMD...: run CMD, record its time and status.
stage() {
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	echo "==== check: $name"
	"$@"
	rc=$?
	summary+=("$(printf '%-52s %5d s  %s' "$name" $(($(date +%s) - t0)) \
		"$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")")")
	return $rc
}

status=0
stage "dependencies" scripts/setup-deps.sh || exit 1
others=$(scripts/platform names | tail -n +2 | tr '\n' ' ')
primary=$(scripts/platform names | head -n 1)

# The host's work, in the background at nice 19: its own stages, recorded in $bg_summary and
# logged to $bg_log, each stage's exit status in $bg_status/NAME.
bg_log=build/check-host-work.log bg_summary=build/check-host-work.summary
bg_status=build/check-host-work.status
rm -rf "$bg_log" "$bg_summary" "$bg_status"
mkdir -p "$bg_status"
# shellcheck disable=SC2317  # bg_stage and host_work run in the background subshell
bg_stage() {
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	echo "==== check (beside the VM suites): $name"
	"$@"
	rc=$?
	printf '%-52s %5d s  %s\n' "$name" $(($(date +%s) - t0)) \
		"$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")" >>"$bg_summary"
	echo $rc >"$bg_status/${name%%:*}"
	return $rc
}
host_work() {
	# shellcheck disable=SC2086  # a word list
	scripts/platform-roots.sh $others >build/platform-roots.log 2>&1 &
	local roots=$!
	bg_stage "$primary: unit tests, checkpatch, fuzzing, packages" \
		$make --no-print-directory layering unit-test checkpatch fuzz deb \
		FUZZ_SECONDS="$($make -s --no-print-directory print-check-fuzz-seconds)"
	bg_stage "roots: $others" wait "$roots" || { cat build/platform-roots.log; return; }
	for p in $others; do
		bg_stage "$p: builds, unit tests, packages" \
			$make --no-print-directory all layering unit-test deb PLATFORM="$p"
	done
	return 0 # each stage's status is in $bg_status
}

stage "$primary: builds" $make --no-print-directory all PLATFORM="$primary" || status=1
(renice -n 19 -p "$BASHPID" >/dev/null && host_work) >"$bg_log" 2>&1 &
host_pid=$!
# Groups of 6 suites: with 8, the last group (test_qp_counters to test_rdma_core, about 650 s)
# ran on after the other lane was done.
stage "$primary: VM suites" env SRNIC_TEST_MATRIX=check SRNIC_RDMA_CORE_RXE=0 SRNIC_VM_LANES=2 \
	SRNIC_VM_GROUP=6 \
	$make --no-print-directory vm-test PLATFORM="$primary" || status=1
stage "host work (waiting for it)" wait "$host_pid"
cat "$bg_log"
[ -f "$bg_summary" ] && mapfile -t -O "${#summary[@]}" summary <"$bg_summary"
# A stage that did not end with status 0 (or did not run) fails the check.
bg_ok() { [ "$(cat "$bg_status/$1" 2>/dev/null)" = 0 ]; }
bg_ok "$primary" || status=1
bg_ok roots || status=1
if bg_ok "$primary"; then
	stage "$primary: packages" $make --no-print-directory package-test PLATFORM="$primary" ||
		status=1
fi
for p in $others; do
	bg_ok "$p" || { status=1; continue; }
	# Groups of 8 suites keep the two lanes about even (two groups of 14 took 418 s and
	# 222 s on trixie) for two more boots of about 10 s.
	stage "$p: VM suites" env SRNIC_TEST_TOPOLOGIES="$($make -s print-platform-topologies)" \
		SRNIC_TEST_MATRIX=platform SRNIC_RDMA_CORE_RXE=0 SRNIC_VM_GROUP=8 SRNIC_VM_LANES=2 \
		$make --no-print-directory vm-test PLATFORM="$p" \
		VM_SUITES="$($make -s --no-print-directory print-platform-suites)" || status=1
	stage "$p: packages" $make --no-print-directory package-test PLATFORM="$p" || status=1
done

echo "==== check: summary ($(($(date +%s) - start)) s in all)"
printf '%s\n' "${summary[@]}"
for p in $(scripts/platform names); do scripts/platform version-line "$p"; done
if [ $status = 0 ]; then echo "check: passed"; else echo "check: FAILED"; fi
exit $status
