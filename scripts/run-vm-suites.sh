#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Run pytest suites inside the VM, one VM boot per suite, and print one
# summary line over all of them.
# Usage: scripts/run-vm-suites.sh [--platform NAME] tests/test_X.py...
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
# SRNIC_STRESS_MESSAGES and SRNIC_STRESS_ACK_TIMEOUT (tests/test_rc_stress.py's
# total and local ACK timeout exponent), SRNIC_RDMA_CORE_RXE (0: tests/test_rdma_core.py
# runs rdma-core's suite against srnic only) and
# PYTEST_ADDOPTS (pytest's own, split like a shell: -k 'a or b' works there).
# SRNIC_VM_SUITE_TIMEOUT bounds each suite's VM (seconds, default 1500).
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
pass_env=()
for var in SRNIC_TEST_DEVICE_KIND SRNIC_TEST_WC_TIMEOUT SRNIC_TEST_TOOL_TIMEOUT \
	SRNIC_TEST_ACK_TIMEOUT SRNIC_TEST_TOPOLOGIES SRNIC_STRESS_MESSAGES SRNIC_STRESS_ACK_TIMEOUT \
	SRNIC_RDMA_CORE_RXE PYTEST_ADDOPTS; do
	if [ -n "${!var:-}" ]; then
		pass_env+=(--env "$var=${!var}")
	fi
done
for suite in "$@"; do
	name=$(basename "$suite" .py)
	# A suite may ask for vm-run options of its own: a line "# srnic-vm-run: OPTIONS".
	read -r -a suite_opts <<<"$(sed -n 's/^# srnic-vm-run: //p' "$suite" | head -n 1)"
	junit=$results/$name.xml
	rm -f "$junit"
	echo "=== VM suite $suite"
	# shellcheck disable=SC2086 # SRNIC_PYTEST_ARGS is a word list
	if ! scripts/vm-run --platform "$platform" --timeout "${SRNIC_VM_SUITE_TIMEOUT:-1500}" \
		--env PYTHONUNBUFFERED=1 --env SRNIC_PLATFORM="$platform" \
		${pass_env[@]+"${pass_env[@]}"} ${suite_opts[@]+"${suite_opts[@]}"} --results "$results" \
		--log "$vmlogs/$name.console.log" -- \
		/usr/bin/python3 -m pytest -v -rs --junitxml="$junit" ${SRNIC_PYTEST_ARGS:-} "$suite"; then
		failed_suites+=("$suite")
	fi
done

# Totals over every suite's junit report (a suite that died has none).
/usr/bin/python3 - "$platform" "$results" "$@" <<'PY'
import os, sys
import xml.etree.ElementTree as ET
platform, results, suites = sys.argv[1], sys.argv[2], sys.argv[3:]
total = {"passed": 0, "failed": 0, "skipped": 0}
for suite in suites:
    path = os.path.join(results, os.path.basename(suite)[:-3] + ".xml")
    if not os.path.exists(path):
        print(f"{suite}: no report (the VM run died)")
        total["failed"] += 1
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
