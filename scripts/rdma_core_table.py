#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The table of an rdma-core comparison run (scripts/rdma-core-compare.sh).

Reads rdma-core-<kind>-<module>.log (unittest -v output of rdma-core's
run_tests.py) for each kind (srnic, rxe) and module named, prints one row per
module with ran/passed/skipped/failed/errors per kind, the totals, and the
tests that failed or errored on each kind, and writes the same text to --out.
A log without unittest's summary (the module crashed or timed out) counts as
one error. Exit status 1 when srnic has a failure or an error.
"""
import argparse
import os
import re
import sys

KINDS = ("srnic", "rxe")
FIELDS = ("ran", "passed", "skipped", "failed", "errors")


def parse_log(text):
    """{field: count} from unittest's summary lines, or None without them."""
    ran = re.search(r"^Ran (\d+) tests? in ", text, re.M)
    result = re.search(r"^(OK|FAILED)(?: \((.*)\))?\s*$", text, re.M)
    if not ran or not result:
        return None
    counts = dict(re.findall(r"(\w+)=(\d+)", result.group(2) or ""))
    c = {"ran": int(ran.group(1)),
         "failed": int(counts.get("failures", 0)),
         "errors": int(counts.get("errors", 0)),
         "skipped": int(counts.get("skipped", 0))}
    c["passed"] = c["ran"] - c["failed"] - c["errors"] - c["skipped"]
    return c


def bad_tests(text):
    """['FAIL: test_x (tests.test_y.Class)', ...] from unittest's report."""
    return re.findall(r"^((?:ERROR|FAIL): \S+ \(\S+\))", text, re.M)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", required=True)
    ap.add_argument("--out")
    ap.add_argument("modules", nargs="+")
    args = ap.parse_args()

    lines = []
    head = f"{'module':<24}" + "".join(
        f" | {k:<5} {'ran':>4} {'pass':>4} {'skip':>4} {'fail':>4} {'err':>4}"
        for k in KINDS)
    lines += [head, "-" * len(head)]
    total = {k: dict.fromkeys(FIELDS, 0) for k in KINDS}
    bad = {k: [] for k in KINDS}
    for m in args.modules:
        row = f"{m:<24}"
        for k in KINDS:
            path = os.path.join(args.logs, f"rdma-core-{k}-{m}.log")
            text = open(path, errors="replace").read() \
                if os.path.exists(path) else ""
            c = parse_log(text)
            if c is None:
                c = dict.fromkeys(FIELDS, 0)
                c["errors"] = 1
                bad[k].append(f"{m}: no unittest summary ({path})")
            else:
                bad[k] += [f"{m}: {t}" for t in bad_tests(text)]
            for f in FIELDS:
                total[k][f] += c[f]
            row += f" | {'':<5} " + " ".join(f"{c[f]:>4}" for f in FIELDS)
        lines.append(row)
    lines.append("-" * len(head))
    lines.append(f"{'total':<24}" + "".join(
        f" | {k:<5} " + " ".join(f"{total[k][f]:>4}" for f in FIELDS)
        for k in KINDS))
    for k in KINDS:
        lines.append("")
        lines.append(f"{k}: {total[k]['ran']} ran, {total[k]['passed']} "
                     f"passed, {total[k]['skipped']} skipped, "
                     f"{total[k]['failed']} failed, {total[k]['errors']} "
                     f"errors")
        lines += [f"  {b}" for b in bad[k]]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 1 if total["srnic"]["failed"] or total["srnic"]["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
