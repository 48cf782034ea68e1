#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Run pytest suites inside the VM, several suites per VM boot, and print one
# summary line over all of them.
# Usage: scripts/run-vm-suites.sh [--platform NAME] tests/test_X.py...
# Suites that ask for the same vm-run options share VMs, up to SRNIC_VM_GROUP suites (default
# 8; 1: a VM per suite) in one pytest run: a boot and pytest's start cost ~10 s each, a tenth
# of make check. Between suites the stack goes back to how the VM booted (tests/conftest.py,
# harness.reset_stack()). A group's console log and junit report are named after its suites
# (test_a.console.log for one suite; test_a..test_d for several).
# --platform (scripts/platforms.conf; default bookworm) boots that platform's root and kernel
# with its builds (scripts/vm-run --platform); its reports and console logs go to
# build/vm/results[/NAME] and build/vm[/NAME] (bookworm's at the top, as before).
# Extra pytest arguments may be given in SRNIC_PYTEST_ARGS (e.g. "-k rename").
# These variables, when set, pass through into the VM: SRNIC_TEST_DEVICE_KIND
# (srnic or rxe: the device kind the RC suites in tests/ test),
# SRNIC_TEST_WC_TIMEOUT and SRNIC_TEST_TOOL_TIMEOUT (their waits, seconds),
# SRNIC_TEST_ACK_TIMEOUT (tests/test_teardown.py's QP ACK timeout exponent;
# its waits scale with it),
# SRNIC_TEST_TOPOLOGIES (comma-separated subset of tests/topology.py's),
# SRNIC_TEST_MATRIX (check: make check's topologies per suite, tests/topology.py),
# SRNIC_STRESS_MESSAGES and SRNIC_STRESS_ACK_TIMEOUT (tests/test_rc_stress.py's
# total and local ACK timeout exponent), SRNIC_RDMA_CORE_RXE (0: tests/test_rdma_core.py
# runs rdma-core's suite against srnic only) and
# PYTEST_ADDOPTS (pytest's own, split like a shell: -k 'a or b' works there).
# SRNIC_VM_SUITE_TIMEOUT is each suite's share of its VM's time limit (seconds; unset, 900 or
# what the suite's "# srnic-vm-run: --timeout N" line says).
# SRNIC_VM_LANES=2 runs two groups at once, each VM with one vCPU: a guest running the suites
# keeps about 1.1 of the host's 2 cores busy, and two one-vCPU guests side by side each take
# about as long as one two-vCPU guest alone (make check's trixie and sid suites: 808 s side by
# side, 1769 s one after the other), where two two-vCPU guests slow each other 2 to 3 times
# (a vCPU holding a guest spinlock descheduled). A group that asks for vCPUs itself
# ("--smp 2": suites about races between CPUs, or measuring what two vCPUs give) or boots a
# peer ("--peer": two VMs already) runs alone, the other lane waiting. Each group's output is
# printed when it ends.
set -uo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
cd "$REPO" || exit 2
platform=bookworm
if [ "${1:-}" = --platform ]; then
	platform=${2:?--platform needs a NAME}
	shift 2
fi
vmlogs=$REPO/build/vm
[ "$platform" = bookworm ] || vmlogs=$REPO/build/vm/$platform
results=$vmlogs/results
mkdir -p "$results"
scripts/platform version-line "$platform"

failed_suites=()
# This run's bookkeeping (which report holds each suite, each lane's output and failures), its
# own: another run of the same platform may share $results.
work=$(mktemp -d "$results/.run.XXXXXX")
trap 'rm -rf "$work"' EXIT
pass_env=()
for var in SRNIC_TEST_DEVICE_KIND SRNIC_TEST_WC_TIMEOUT SRNIC_TEST_TOOL_TIMEOUT \
	SRNIC_TEST_ACK_TIMEOUT SRNIC_TEST_TOPOLOGIES SRNIC_TEST_MATRIX SRNIC_STRESS_MESSAGES SRNIC_STRESS_ACK_TIMEOUT \
	SRNIC_RDMA_CORE_RXE PYTEST_ADDOPTS; do
	if [ -n "${!var:-}" ]; then
		pass_env+=(--env "$var=${!var}")
	fi
done
# The groups: suites with the same options (their "# srnic-vm-run: OPTIONS" line, less
# --timeout, which adds up), in the order given, SRNIC_VM_GROUP at most per group.
group_size=${SRNIC_VM_GROUP:-8}
declare -A key_groups=()
groups=() group_opts=() group_timeout=()
for suite in "$@"; do
	opts=$(sed -n 's/^# srnic-vm-run: //p' "$suite" | head -n 1)
	limit=${SRNIC_VM_SUITE_TIMEOUT:-900}
	if [[ "$opts" =~ (^|[[:space:]])--timeout[[:space:]]+([0-9]+) ]]; then
		[ -n "${SRNIC_VM_SUITE_TIMEOUT:-}" ] || limit=${BASH_REMATCH[2]}
		opts=$(echo "$opts" | sed -E 's/(^|[[:space:]])--timeout[[:space:]]+[0-9]+//')
	fi
	read -r -a words <<<"$opts"
	opts=${words[*]+"${words[*]}"}
	key="x$opts"
	g=${key_groups[$key]:-}
	if [ -z "$g" ] || [ "$(wc -w <<<"${groups[$g]}")" -ge "$group_size" ]; then
		g=${#groups[@]}
		groups+=("") group_opts+=("$opts") group_timeout+=(0)
		key_groups[$key]=$g
	fi
	groups[g]="${groups[$g]} $suite"
	group_timeout[g]=$((group_timeout[g] + limit))
done

lanes=${SRNIC_VM_LANES:-1}
[[ "$lanes" =~ ^[12]$ ]] || { echo "SRNIC_VM_LANES: 1 or 2, got '$lanes'" >&2; exit 2; }
# run_group G: group G's VM; its exit status is the group's.
run_group() {
	local g=$1 name=$2 junit=$3 smp_opt=()
	local -a members suite_opts
	read -r -a members <<<"${groups[$g]}"
	read -r -a suite_opts <<<"${group_opts[$g]}"
	# In a lane, one vCPU (a suite's own --smp, later on the line, wins).
	alone "$g" || smp_opt=(--smp 1)
	echo "=== VM suites ${members[*]}"
	# shellcheck disable=SC2086 # SRNIC_PYTEST_ARGS is a word list
	scripts/vm-run --platform "$platform" --timeout "${group_timeout[$g]}" \
		--env PYTHONUNBUFFERED=1 --env SRNIC_PLATFORM="$platform" \
		${pass_env[@]+"${pass_env[@]}"} ${smp_opt[@]+"${smp_opt[@]}"} \
		${suite_opts[@]+"${suite_opts[@]}"} --results "$results" \
		--log "$vmlogs/$name.console.log" -- \
		/usr/bin/python3 -m pytest -v -rs --junitxml="$junit" ${SRNIC_PYTEST_ARGS:-} \
		"${members[@]}"
}
# A group that runs alone beside no other VM.
alone() { [ "$lanes" = 1 ] || [[ " ${group_opts[$1]} " =~ " --smp "[2-9]|" --peer " ]]; }
# finish_one: wait for a background group, print its output.
finish_one() {
	local done_pid
	wait -n -p done_pid
	cat "$work/group-$done_pid.out"
	rm -f "$work/group-$done_pid.out"
	running=$((running - 1))
}
drain() { while [ "$running" -gt 0 ]; do finish_one; done; }
# The groups that run alone go first: the lanes then drain once, at the end.
order=()
for g in "${!groups[@]}"; do alone "$g" && order+=("$g"); done
for g in "${!groups[@]}"; do alone "$g" || order+=("$g"); done
running=0
for g in "${order[@]}"; do
	read -r -a members <<<"${groups[$g]}"
	name=$(basename "${members[0]}" .py)
	[ ${#members[@]} = 1 ] || name="$name..$(basename "${members[-1]}" .py)"
	junit=$results/$name.xml
	rm -f "$junit"
	# For the totals: which report holds each suite.
	for suite in "${members[@]}"; do echo "$suite $junit"; done >>"$work/reports"
	if alone "$g"; then
		drain
		run_group "$g" "$name" "$junit" || echo "${members[*]}" >>"$work/group-$g.rc"
		continue
	fi
	[ $running -lt "$lanes" ] || finish_one
	(
		exec >"$work/group-$BASHPID.out" 2>&1
		run_group "$g" "$name" "$junit" || echo "${members[*]}" >>"$work/group-$g.rc"
	) &
	running=$((running + 1))
done
drain
for f in "$work"/group-*.rc; do
	[ -e "$f" ] || continue
	read -r -a members <"$f"
	failed_suites+=("${members[@]}")
	rm -f "$f"
done

# Totals over every group's junit report (a group whose VM died has none: its suites count
# as failed).
/usr/bin/python3 - "$platform" "$work/reports" <<'PY'
import os, sys
import xml.etree.ElementTree as ET
platform, reports = sys.argv[1], sys.argv[2]
by_report = {}
for line in open(reports):
    suite, path = line.split()
    by_report.setdefault(path, []).append(suite)
total = {"passed": 0, "failed": 0, "skipped": 0}
for path, suites in by_report.items():
    if not os.path.exists(path):
        print(f"{' '.join(suites)}: no report (the VM run died)")
        total["failed"] += len(suites)
        continue
    for ts in ET.parse(path).getroot().iter("testsuite"):
        tests, fail = int(ts.get("tests")), int(ts.get("failures")) + int(ts.get("errors"))
        skip = int(ts.get("skipped"))
        total["failed"] += fail
        total["skipped"] += skip
        total["passed"] += tests - fail - skip
print(f"VM suites on {platform}: {total['passed']} passed, {total['failed']} failed, "
      f"{total['skipped']} skipped")
PY

if [ ${#failed_suites[@]} -gt 0 ]; then
	echo "failed VM suites on $platform: ${failed_suites[*]}" >&2
	exit 1
fi
