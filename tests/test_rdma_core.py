# SPDX-License-Identifier: GPL-2.0
"""rdma-core's own pyverbs suite (the outside judge) against srnic, and
against this kernel's rxe in the same boot.

The suite is the platform's own (Debian's /usr/share/doc/rdma-core/tests
of the rdma-core in the VM's root: 44 on Debian 12, 56 on 13, 65 on sid).
Every generic module of it (all but the mlx5, efa and CUDA ones: 19 in 44,
20 in 56, 23 in 65) runs in its own process (one crash cannot hide the
others) against srnic0, on a veth end in the netns rcsrnic, and against
rxe0 on a veth end in init_net (rdma_rxe binds UDP 4791 there), each with
the --gid of its RoCE v2 IPv4 GID, as scripts/rdma-core-compare.sh does.

srnic must have no failure and no error in any module, must pass every
test of tests/rdma_core_srnic_passes.txt that this suite has (the tests
srnic passes with rdma-core 44: a verb that regresses to EOPNOTSUPP turns
a pass into a skip, which this notices, on every platform), and must pass
more tests than rxe (unless SRNIC_RDMA_CORE_RXE=0, as make check's run on
the platforms other than the primary sets it: srnic's side only). Each run's unittest output is kept in
$SRNIC_RESULTS/rdma-core-<kind>-<module>.log; the counts and skip reasons
are printed (pytest -s) and Documentation/rdma-core-tests.rst has them.
"""
import gzip
import os
import re
import shutil
import subprocess
import sys

import pytest

import harness

SUITE_SRC = "/usr/share/doc/rdma-core/tests"
NETNS = "rcsrnic"
BASELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "rdma_core_srnic_passes.txt")
LOGS = os.environ.get("SRNIC_RESULTS", "/tmp")
# SRNIC_RDMA_CORE_RXE=0: srnic alone (make check's other platforms; their
# rxe comparison is make check PLATFORM=NAME's).
WITH_RXE = os.environ.get("SRNIC_RDMA_CORE_RXE", "1") != "0"
# Modules for hardware srnic is not (and a GPU the VM does not have).
VENDOR = re.compile(r"^test_(mlx5|efa|cuda)")

if not os.path.isdir(SUITE_SRC):
    pytest.skip(f"{SUITE_SRC} missing (Debian package python3-pyverbs)",
                allow_module_level=True)
pytest.importorskip("pyverbs")


def generic_modules():
    names = set()
    for f in os.listdir(SUITE_SRC):
        m = re.fullmatch(r"(test_\w+)\.py(\.gz)?", f)
        if m and not VENDOR.match(m.group(1)):
            names.add(m.group(1))
    return sorted(names)


MODULES = generic_modules()
# {kind: {module: {test id: "ok" | "skipped" | "FAIL" | "ERROR"}}}
results = {"srnic": {}, "rxe": {}}


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory):
    """A runnable copy of the suite: Debian gzips some of its files."""
    dst = tmp_path_factory.mktemp("rdma-core") / "tests"
    shutil.copytree(SUITE_SRC, dst)
    for root, _, files in os.walk(dst):
        for name in files:
            if name.endswith(".gz"):
                path = os.path.join(root, name)
                with gzip.open(path, "rb") as f, open(path[:-3], "wb") as out:
                    shutil.copyfileobj(f, out)
                os.unlink(path)
    return dst.parent


def gid_index(dev, addr):
    want = harness.ipv4_gid(addr)
    return harness.wait_for(
        lambda: [i for i, g, t in harness.port_gids(dev)
                 if g == want and t == "RoCE v2"],
        timeout=20, what=f"RoCE v2 GID of {addr} on {dev}")[0]


@pytest.fixture(scope="module")
def devices():
    """{kind: (device, gid index, netns)}: srnic0 in NETNS, rxe0 in
    init_net, both up for the whole module."""
    srnic_veth = harness.Veth()
    rxe_veth = harness.Veth()
    harness.run("ip", "netns", "add", NETNS)
    try:
        for end in (srnic_veth.a, srnic_veth.b):
            harness.run("ip", "link", "set", end, "netns", NETNS)
            harness.run("ip", "link", "set", end, "up", netns=NETNS)
        harness.run("ip", "link", "set", "lo", "up", netns=NETNS)
        harness.run("ip", "addr", "add", "198.18.0.1/24", "dev", srnic_veth.a,
                    netns=NETNS)
        harness.run("ip", "addr", "add", "198.18.1.1/24", "dev", rxe_veth.a)
        harness.run("modprobe", "srnic")
        harness.run("modprobe", "rdma_rxe")
        harness.link_add("srnic0", srnic_veth.a, netns=NETNS)
        harness.run("rdma", "link", "add", "rxe0", "type", "rxe", "netdev",
                    rxe_veth.a)
        yield {"srnic": ("srnic0", gid_index("srnic0", "198.18.0.1"), NETNS),
               "rxe": ("rxe0", gid_index("rxe0", "198.18.1.1"), None)}
    finally:
        for dev in ("srnic0", "rxe0"):
            harness.run("rdma", "link", "delete", dev, check=False)
        harness.run("ip", "netns", "del", NETNS, check=False)
        srnic_veth.close()
        rxe_veth.close()


def parse_summary(out):
    """(ran, failures, errors, skipped) from unittest's last lines, or None."""
    ran = re.search(r"^Ran (\d+) tests? in ", out, re.M)
    result = re.search(r"^(OK|FAILED)(?: \((.*)\))?\s*$", out, re.M)
    if not ran or not result:
        return None
    counts = dict(re.findall(r"(\w+)=(\d+)", result.group(2) or ""))
    return (int(ran.group(1)), int(counts.get("failures", 0)),
            int(counts.get("errors", 0)), int(counts.get("skipped", 0)))


OUTCOME = re.compile(r"(?:^|\.\.\. )(ok|skipped|FAIL|ERROR|expected failure|"
                     r"unexpected success)(?: '.*')?$")


def parse_tests(out):
    """{module.Class.test: outcome} from unittest -v's output, the "tests."
    package prefix left out. A test's line is "test (module.Class) ..."
    (3.12 on: "test (module.Class.test) ..."), maybe followed by its
    docstring's first line, and its outcome ends that line ("... ok") or,
    when the test printed something, stands on a line of its own."""
    outcomes = {}
    pending = None
    for line in out.splitlines():
        head = re.match(r"^(\w+) \(([\w.]+)\)", line)
        if head:
            name, where = head.groups()
            if not where.endswith("." + name):
                where = f"{where}.{name}"
            pending = where.removeprefix("tests.")
            line = line[head.end():]
        if pending is None:
            continue
        outcome = OUTCOME.search(line.strip())
        if outcome:
            outcomes[pending] = outcome.group(1)
            pending = None
    return outcomes


# run_tests.py with multiprocessing's "fork" start method, the default on
# Linux before Python 3.14 (sid's), which made it "forkserver": the suite's
# multi-process tests (rdma-core 65's test_multi_process_alloc_dm) pass their
# test case to the child, which only fork can (forkserver pickles it and
# fails: "cannot pickle 'TextIOWrapper' instances").
RUN_TESTS_WITH_FORK = (
    "import multiprocessing, runpy, sys; "
    "multiprocessing.set_start_method('fork'); "
    "sys.path.insert(0, 'tests'); sys.argv[0] = 'tests/run_tests.py'; "
    "runpy.run_path('tests/run_tests.py', run_name='__main__')")


def run_module(suite_dir, kind, dev, gid, netns, module):
    argv = [sys.executable, "-c", RUN_TESTS_WITH_FORK, "--dev", dev, "--gid",
            str(gid), "-v", f"tests.{module}"]
    if netns:
        argv = ["ip", "netns", "exec", netns] + argv
    try:
        p = subprocess.run(argv, cwd=suite_dir, capture_output=True,
                           text=True, timeout=300)
        out = p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = f"{e.stdout or ''}{e.stderr or ''}\nTIMEOUT after 300 s"
        p = None
    with open(os.path.join(LOGS, f"rdma-core-{kind}-{module}.log"), "w") as f:
        f.write(out)
    return p, out


def counts(kind):
    tests = [o for m in results[kind].values() for o in m.values()]
    return (sum(o == "ok" for o in tests), sum(o == "skipped" for o in tests),
            sum(o in ("FAIL", "ERROR") for o in tests))


@pytest.mark.parametrize("module", MODULES)
def test_module(module, devices, suite_dir):
    if WITH_RXE:
        dev, gid, netns = devices["rxe"]
        _, out = run_module(suite_dir, "rxe", dev, gid, netns, module)
        results["rxe"][module] = parse_tests(out)
        if parse_summary(out) is None:  # rxe crashed or hung: one error
            results["rxe"][module]["(module)"] = "ERROR"

    dev, gid, netns = devices["srnic"]
    p, out = run_module(suite_dir, "srnic", dev, gid, netns, module)
    results["srnic"][module] = parse_tests(out)
    summary = parse_summary(out)
    assert summary, f"no unittest summary from srnic's run:\n{out[-6000:]}"
    ran, failures, errors, skipped = summary
    skips = re.findall(r"\.\.\. skipped '(.*)'$", out, re.M)
    print(f"{module}: srnic ran {ran}, passed {ran - failures - errors - skipped}, "
          f"skipped {skipped}: {sorted(set(skips))}")
    assert (failures, errors) == (0, 0), out[-8000:]
    assert p.returncode == 0, out[-8000:]


def test_passes_what_srnic_passed_with_rdma_core_44():
    if len(results["srnic"]) != len(MODULES):
        pytest.skip("not every module ran")
    with open(BASELINE) as f:
        baseline = {line.strip() for line in f
                    if line.strip() and not line.startswith("#")}
    here = {t: o for m in results["srnic"].values() for t, o in m.items()}
    # What passes here, in the baseline's format (a port's new baseline).
    with open(os.path.join(LOGS, "rdma-core-srnic-passes.txt"), "w") as f:
        f.write("".join(f"{t}\n" for t in sorted(here) if here[t] == "ok"))
    shared = baseline & set(here)
    print(f"baseline: {len(baseline)} tests passed on rdma-core 44; "
          f"{len(shared)} of them in this suite")
    assert len(shared) >= min(len(baseline), 100), sorted(baseline - set(here))
    lost = sorted(t for t in shared if here[t] != "ok")
    assert not lost, [f"{t}: {here[t]}" for t in lost]


def test_more_passes_than_rxe():
    if not WITH_RXE:
        pytest.skip("SRNIC_RDMA_CORE_RXE=0: rxe's side not run")
    if len(results["srnic"]) != len(MODULES):
        pytest.skip("not every module ran")
    srnic, rxe = counts("srnic"), counts("rxe")
    print(f"rdma-core suite, {len(MODULES)} modules: srnic {srnic[0]} passed, "
          f"{srnic[1]} skipped, {srnic[2]} failed or errors; rxe {rxe[0]} "
          f"passed, {rxe[1]} skipped, {rxe[2]} failed or errors")
    assert srnic[0] > rxe[0], (srnic, rxe)
