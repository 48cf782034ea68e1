#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# check.sh: what `make check` (README's test command, CI's .ci/run) runs: every test on the
# primary platform (make check-platform PLATFORM=bookworm), then on each other platform its
# builds, unit tests, packages and the VM suites of what differs there (make
# vm-test-platform, PLATFORM_SUITES). The other platforms' roots are made in the background
# meanwhile (debootstrap waits on the network more than on the CPU). Every stage runs even
# when one before it failed; the summary at the end lists each with its time and status.
set -uo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
cd "$REPO" || exit 2
make=${MAKE:-make}
start=$(date +%s)
summary=()

stage() {
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	echo "==== check: $name"
	"$@"
	rc=$?
	summary+=("$(printf '%-34s %5d s  %s' "$name" $(($(date +%s) - t0)) \
		"$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")")")
	return $rc
}

status=0
stage "dependencies" scripts/setup-deps.sh || exit 1
others=$(scripts/platform names | tail -n +2 | tr '\n' ' ')
mkdir -p build
# shellcheck disable=SC2086  # a word list
scripts/platform-roots.sh $others >build/platform-roots.log 2>&1 &
roots=$!

stage "bookworm: every test" $make --no-print-directory check-platform PLATFORM=bookworm ||
	status=1
stage "roots: $others" wait "$roots" || { cat build/platform-roots.log; status=1; }
for p in $others; do
	stage "$p: builds, unit tests, packages" \
		$make --no-print-directory all unit-test deb PLATFORM="$p" || { status=1; continue; }
	stage "$p: VM suites" env SRNIC_TEST_TOPOLOGIES="$($make -s print-platform-topologies)" \
		$make --no-print-directory vm-test PLATFORM="$p" \
		VM_SUITES="$($make -s --no-print-directory print-platform-suites)" || status=1
done

echo "==== check: summary ($(($(date +%s) - start)) s in all)"
printf '%s\n' "${summary[@]}"
cat build/platform-roots.log 2>/dev/null | grep -E '^[a-z]+: MADE=' || true
exit $status
