#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Run a libFuzzer target for a bounded time on a copy of its kept corpus, so
# the corpus in the repository is only read. Fails on any crash, sanitizer
# report, leak, timeout or out-of-memory, and prints the run's statistics.
#
#   scripts/run-fuzz.sh TARGET CORPUS WORKDIR [SECONDS [RUNS]]
#
# TARGET   the fuzzer binary (make fuzz builds build/fuzz/fuzz_wire)
# CORPUS   the kept seed corpus (userspace/fuzz/corpus/wire)
# WORKDIR  where the working corpus, crash artifacts and log go (recreated)
# SECONDS  run time, default 60; RUNS caps the executions, default unlimited
#
# Extra libFuzzer flags can be given in FUZZ_ARGS. A crashing input is left
# in WORKDIR/artifacts/; reproduce it with `TARGET WORKDIR/artifacts/crash-...`.
set -euo pipefail

target=${1:?usage: run-fuzz.sh TARGET CORPUS WORKDIR [SECONDS [RUNS]]}
corpus=${2:?usage: run-fuzz.sh TARGET CORPUS WORKDIR [SECONDS [RUNS]]}
work=${3:?usage: run-fuzz.sh TARGET CORPUS WORKDIR [SECONDS [RUNS]]}
seconds=${4:-60}
runs=${5:--1}
name=$(basename "$target")

rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp -a "$corpus/." "$work/corpus/"
seeds=$(find "$work/corpus" -type f | wc -l)

echo "run-fuzz: $name for ${seconds} s on a copy of $corpus ($seeds inputs)"
# -max_total_time bounds the run; the outer timeout only catches a fuzzer
# that hangs outside of an input (where -timeout does not apply).
status=0
timeout --signal=KILL $((seconds + 60)) \
	"$target" -max_total_time="$seconds" -runs="$runs" -timeout=10 \
	-rss_limit_mb=2048 -max_len=1024 -use_value_profile=1 \
	-print_final_stats=1 -artifact_prefix="$work/artifacts/" \
	${FUZZ_ARGS:-} "$work/corpus" >"$work/fuzz.log" 2>&1 || status=$?

artifacts=$(find "$work/artifacts" -type f | wc -l)
last=$(grep -E '^#[0-9]+' "$work/fuzz.log" | tail -n 1 || true)
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corp=$(find "$work/corpus" -type f | wc -l)

if [ "$status" -ne 0 ] || [ "$artifacts" -ne 0 ] ||
	grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant violated' \
		"$work/fuzz.log"; then
	echo "run-fuzz: $name FAILED (exit $status, $artifacts artifacts); log:"
	tail -n 60 "$work/fuzz.log"
	find "$work/artifacts" -type f -exec echo "run-fuzz: artifact {}" \;
	exit 1
fi
echo "run-fuzz: $name passed: ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}," \
	"corpus $seeds -> $corp inputs, 0 crashes (log: $work/fuzz.log)"
