#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# check.sh: what `make check` (README's test command, CI's .ci/run) runs, in two lanes side by
# side, each with one VM at a time (a TCG guest keeps about one of the two host cores busy on
# average, so two lanes take little longer than the longer one alone):
#
#   bookworm   every test on the primary platform (make check-platform PLATFORM=bookworm)
#   platforms  the other platforms' roots (made while the bookworm lane starts), then for each:
#              its builds, unit tests and packages, the VM suites of what differs there
#              (PLATFORM_SUITES on PLATFORM_TOPOLOGIES) and the packages' test
#
# Each lane's lines arrive prefixed with its name as they are printed, and its full log is
# kept in build/check-<lane>.log. Every stage runs even when one before it failed; the summary
# lists each stage with its time and status. Exit status 0 when every stage passed.
set -uo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
cd "$REPO" || exit 2
make=${MAKE:-make}
start=$(date +%s)
mkdir -p build
rm -f build/check-*.log build/check-*.summary

# stage LANE NAME CMD...: run CMD, record its time and status in the lane's summary.
stage() {
	local lane=$1 name=$2 t0 rc
	shift 2
	t0=$(date +%s)
	echo "==== check: $name"
	"$@"
	rc=$?
	printf '%-12s %-36s %5d s  %s\n' "$lane" "$name" $(($(date +%s) - t0)) \
		"$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")" >>"build/check-$lane.summary"
	return $rc
}

# lane NAME FUNCTION: FUNCTION's output to the lane's log and, prefixed, to ours.
lane() {
	local name=$1
	shift
	"$@" 2>&1 | tee "build/check-$name.log" | sed -u "s/^/[$name] /"
	return "${PIPESTATUS[0]}"
}

bookworm_lane() {
	stage bookworm "every test" $make --no-print-directory check-platform PLATFORM=bookworm
}

platforms_lane() {
	local p status=0 others
	others=$(scripts/platform names | tail -n +2 | tr '\n' ' ')
	# shellcheck disable=SC2086  # a word list
	stage platforms "roots: $others" scripts/platform-roots.sh $others || return 1
	for p in $others; do
		stage platforms "$p: builds, unit tests, packages" \
			$make --no-print-directory all unit-test deb PLATFORM="$p" || { status=1; continue; }
		stage platforms "$p: VM suites" \
			env SRNIC_TEST_TOPOLOGIES="$($make -s print-platform-topologies)" \
			$make --no-print-directory vm-test PLATFORM="$p" \
			VM_SUITES="$($make -s --no-print-directory print-platform-suites)" || status=1
		stage platforms "$p: packages" \
			$make --no-print-directory package-test PLATFORM="$p" || status=1
	done
	return $status
}

status=0
stage all "dependencies" scripts/setup-deps.sh >/dev/null 2>build/check-deps.log ||
	{ cat build/check-deps.log; exit 1; }
lane bookworm bookworm_lane &
a=$!
lane platforms platforms_lane &
b=$!
wait $a || status=1
wait $b || status=1

echo "==== check: summary ($(($(date +%s) - start)) s in all)"
cat build/check-all.summary build/check-bookworm.summary build/check-platforms.summary 2>/dev/null
for p in $(scripts/platform names); do scripts/platform version-line "$p"; done
[ $status = 0 ] && echo "check: passed" || echo "check: FAILED (logs: build/check-*.log)"
exit $status
