# SPDX-License-Identifier: GPL-2.0
"""The standard tools over RC on every topology (tests/topology.py):
ibv_rc_pingpong (several sizes, polling and -e events, -c checks every
received buffer) and perftest's ib_{send,write,read}_{bw,lat} from 1 byte
to 1 MiB, each with a server on end a and a client on end b, each in its
end's netns; both must exit 0 within SRNIC_TEST_TOOL_TIMEOUT seconds.

And the fast path's promise: a steady stream of posts makes no syscall per
post. ib_{write,send}_bw run under `strace -f -c` with two iteration counts;
the difference in syscalls (clock reads left out) over the difference in
posts is the cost per post (setup and teardown cancel out). srnic must stay below 0.1; rxe, whose
provider rings a doorbell with write() on every post, is only recorded.
"""
import itertools
import os
import signal
import subprocess
import time

import pytest

from topology import KIND, topology  # noqa: F401 (fixture)

TOOL_TIMEOUT = float(os.environ.get("SRNIC_TEST_TOOL_TIMEOUT", "60"))
MiB = 1 << 20
ports = itertools.count(18600)


class Proc:
    """A tool in its own session (killed as a group), output to a file."""

    def __init__(self, argv, log):
        self.argv = argv
        self.log = log
        self.out = open(log, "w+")
        self.p = subprocess.Popen(argv, stdout=self.out,
                                  stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL,
                                  start_new_session=True)

    def wait(self, timeout):
        try:
            return self.p.wait(timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()

    def output(self):
        self.out.flush()
        self.out.seek(0)
        return self.out.read()[-4000:]


def listening(pid, port):
    """True once process pid (in its netns) listens on TCP port."""
    hexport = f":{port:04X} "
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if (fields[1] + " ").endswith(hexport) and \
                            fields[3] == "0A":
                        return True
        except OSError:
            return False
    return False


def run_pair(topo, server_argv, client_argv, port, tmp_path, tag):
    """Server on end a, client on end b (to a's address); both exit 0."""
    a, b = topo.a, topo.b
    # Line-buffered: a tool killed at the timeout still shows how far it got.
    server = Proc(a.cmd("stdbuf", "-oL", *server_argv),
                  tmp_path / f"{tag}-server.log")
    deadline = time.monotonic() + TOOL_TIMEOUT
    client = None
    try:
        while not listening(server.p.pid, port):
            if server.p.poll() is not None:
                raise AssertionError(
                    f"{tag}: server exited {server.p.returncode} before "
                    f"listening:\n{server.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{tag}: server not listening after "
                                     f"{TOOL_TIMEOUT}s:\n{server.output()}")
            time.sleep(0.05)
        client = Proc(b.cmd("stdbuf", "-oL", *client_argv, a.addr),
                      tmp_path / f"{tag}-client.log")
        crc = client.wait(deadline - time.monotonic())
        src = server.wait(deadline - time.monotonic() + 5)
        msg = (f"{tag}: client exit {crc}, server exit {src} "
               f"(None: killed after {TOOL_TIMEOUT}s)\n"
               f"--- client: {' '.join(client.argv)}\n{client.output()}\n"
               f"--- server: {' '.join(server.argv)}\n{server.output()}")
        assert crc == 0 and src == 0, msg
        return client.output(), server.output()
    finally:
        server.kill()
        if client:
            client.kill()


# ---- ibv_rc_pingpong ---------------------------------------------------------

@pytest.mark.parametrize("events", [False, True], ids=["poll", "events"])
@pytest.mark.parametrize("size", [1, 4096, 65536])
def test_rc_pingpong(topology, size, events, tmp_path):
    port = next(ports)
    iters = 100 if size < 65536 else 20

    def argv(end):
        return (["ibv_rc_pingpong", "-d", end.name, "-g", str(end.gid_index),
                 "-s", str(size), "-n", str(iters), "-r", "16", "-p",
                 str(port), "-c"] + (["-e"] if events else []))

    out, _ = run_pair(topology, argv(topology.a), argv(topology.b), port,
                      tmp_path, f"pingpong-{size}")
    assert f"{iters} iters" in out, out


# ---- perftest ----------------------------------------------------------------

TOOLS = ["ib_send_bw", "ib_write_bw", "ib_read_bw",
         "ib_send_lat", "ib_write_lat", "ib_read_lat"]


def perftest_argv(tool, end, size, iters, port):
    return [tool, "-d", end.name, "-x", str(end.gid_index), "-c", "RC",
            "-s", str(size), "-n", str(iters), "-p", str(port), "-F"]


@pytest.mark.parametrize("size", [1, 4096, MiB])
@pytest.mark.parametrize("tool", TOOLS)
def test_perftest(topology, tool, size, tmp_path):
    port = next(ports)
    iters = 5 if size == MiB else 50
    out, _ = run_pair(topology,
                      perftest_argv(tool, topology.a, size, iters, port),
                      perftest_argv(tool, topology.b, size, iters, port),
                      port, tmp_path, f"{tool}-{size}")
    # The results table: a line starting with the message size.
    assert any(line.split()[:1] == [str(size)] for line in out.splitlines()), \
        out


# ---- syscalls per post -------------------------------------------------------

# Clock reads are not the provider's: in the VM (TCG) the clocksource has no
# vDSO support, so perftest's gettimeofday calls become syscalls, a number
# that varies from run to run. Left out of the count.
CLOCK_CALLS = {"gettimeofday", "clock_gettime", "clock_gettime64", "time"}


def strace_calls(path):
    """Syscalls in an `strace -c` summary, clock reads left out."""
    table = strace_table(path)
    assert table, open(path).read()
    return sum(n for name, n in table.items() if name not in CLOCK_CALLS)


def strace_table(path):
    """{syscall: calls} of an `strace -c` summary."""
    table = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 5 and fields[3].isdigit() and \
                    fields[-1] != "total":
                table[fields[-1]] = int(fields[3])
    return table


def growth(before, after):
    """The syscalls whose counts grew most between two summaries."""
    grown = {k: after[k] - before.get(k, 0) for k in after}
    top = sorted(grown.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{k} +{v}" for k, v in top if v > 0) or "none"


def strace_argv(path, argv):
    return ["strace", "-f", "-c", "-o", str(path)] + argv


@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_send_bw"])
def test_syscalls_per_post(topology, tool, tmp_path):
    """Syscalls per post in steady state, from two runs of N1 and N2 posts
    at each end (the client posts the sends or writes, for ib_send_bw the
    server posts as many receives)."""
    n1, n2 = 200, 2200
    calls, tables = {}, {}
    for n in (n1, n2):
        port = next(ports)
        s_trace, c_trace = tmp_path / f"s{n}", tmp_path / f"c{n}"
        run_pair(topology,
                 strace_argv(s_trace, perftest_argv(tool, topology.a, 64, n,
                                                    port)),
                 strace_argv(c_trace, perftest_argv(tool, topology.b, 64, n,
                                                    port)),
                 port, tmp_path, f"strace-{tool}-{n}")
        calls[n] = (strace_calls(s_trace), strace_calls(c_trace))
        tables[n] = (strace_table(s_trace), strace_table(c_trace))
    per_post_client = (calls[n2][1] - calls[n1][1]) / (n2 - n1)
    per_post_server = (calls[n2][0] - calls[n1][0]) / (n2 - n1)
    report = (f"{KIND} {topology.id} {tool}: client {per_post_client:.3f} "
              f"syscalls/post, server {per_post_server:.3f} "
              f"syscalls/post (totals {calls}; grown: client "
              f"{growth(tables[n1][1], tables[n2][1])}, server "
              f"{growth(tables[n1][0], tables[n2][0])})")
    print(report)
    results = os.environ.get("SRNIC_RESULTS")
    if results and os.path.isdir(results):
        with open(os.path.join(results, "rc-syscalls-per-post.txt"),
                  "a") as f:
            f.write(report + "\n")
    for end, per_post in ((topology.a, per_post_server),
                          (topology.b, per_post_client)):
        if end.kind == "srnic":
            assert per_post < 0.1, report
