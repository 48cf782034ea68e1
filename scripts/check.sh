#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# check.sh: what `make check` (README's test command, CI's .ci/run) runs, one VM at a time:
#
#   1. every test on the primary platform (make check-platform PLATFORM=bookworm), each
#      topology-parametrised suite on the topologies whose paths differ for it
#      (SRNIC_TEST_MATRIX=check, tests/topology.py) and rdma-core's suite against srnic only,
#      while the other platforms' roots are made in the background (debootstrap waits on the
#      network more than on the CPU);
#   2. for each other platform: its builds, unit tests and packages, the VM suites of what
#      differs there (PLATFORM_SUITES on PLATFORM_TOPOLOGIES; rdma-core's suite against srnic
#      only, its rxe side is make check PLATFORM=NAME's), and the packages' install test.
#
# Two VMs side by side were tried: each suite then took 2 to 3 times as long (TCG wants both
# cores), so nothing was gained. The full matrix (every topology, rdma-core's suite against
# rxe too) is make check PLATFORM=NAME's and make check-all's. Every stage runs even when one before it failed; the summary
# lists each stage with its time and status, and each platform's versions. Exit status 0 when
# every stage passed.
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
	summary+=("$(printf '%-38s %5d s  %s' "$name" $(($(date +%s) - t0)) \
		"$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")")")
	return $rc
}

status=0
stage "dependencies" scripts/setup-deps.sh || exit 1
others=$(scripts/platform names | tail -n +2 | tr '\n' ' ')
# shellcheck disable=SC2086  # a word list
scripts/platform-roots.sh $others >build/platform-roots.log 2>&1 &
roots=$!

stage "bookworm: every test" env SRNIC_TEST_MATRIX=check SRNIC_RDMA_CORE_RXE=0 \
	$make --no-print-directory check-platform PLATFORM=bookworm ||
	status=1
stage "roots: $others" wait "$roots" || { cat build/platform-roots.log; status=1; }
for p in $others; do
	stage "$p: builds, unit tests, packages" \
		$make --no-print-directory all layering unit-test deb PLATFORM="$p" || { status=1; continue; }
	# Their roots boot in about 20 s, twice the primary's: 13 suites to a boot, two boots.
	stage "$p: VM suites" env SRNIC_TEST_TOPOLOGIES="$($make -s print-platform-topologies)" \
		SRNIC_TEST_MATRIX=platform SRNIC_RDMA_CORE_RXE=0 SRNIC_VM_GROUP=13 \
		$make --no-print-directory vm-test PLATFORM="$p" \
		VM_SUITES="$($make -s --no-print-directory print-platform-suites)" || status=1
	stage "$p: packages" $make --no-print-directory package-test PLATFORM="$p" || status=1
done

echo "==== check: summary ($(($(date +%s) - start)) s in all)"
printf '%s\n' "${summary[@]}"
for p in $(scripts/platform names); do scripts/platform version-line "$p"; done
if [ $status = 0 ]; then echo "check: passed"; else echo "check: FAILED"; fi
exit $status
