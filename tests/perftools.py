# SPDX-License-Identifier: GPL-2.0
"""Running the standard RDMA tools (ibv_rc_pingpong, perftest) between the
two ends of a topology (tests/topology.py), and counting their syscalls.

Shared by tests/test_rc_tools.py and the benchmark (scripts/bench.py):

  run_pair()           a server on end a, a client on end b, each in its
                       end's netns, both must exit 0 within a timeout
  perftest_argv()      one perftest tool's command line for one end
  ucx_has_verbs_transports(), ucx_version()
                       whether this platform's UCX can use RDMA devices
  syscalls_per_post()  the steady-state syscall cost of a post: two runs
                       under `strace -f -c` with N1 and N2 iterations, the
                       difference in syscalls (clock reads left out) over
                       the difference in posts (setup and teardown cancel)
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import time

TOOL_TIMEOUT = float(os.environ.get("SRNIC_TEST_TOOL_TIMEOUT", "60"))


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


def run_pair(topo, server_argv, client_argv, port, tmp_path, tag,
             timeout=None, ready=None, client_to_addr=True,
             whole_logs=False):
    """Server on end a, client on end b (to a's address, appended to
    client_argv unless client_to_addr is false) once the server is ready
    (ready(server), default: it listens on TCP port); both exit 0 within
    timeout seconds (default SRNIC_TEST_TOOL_TIMEOUT, 60), or
    AssertionError with both outputs. Returns (client output, server
    output): their tails, or with whole_logs the whole logs, which stay in
    tmp_path/TAG-{server,client}.log."""
    timeout = TOOL_TIMEOUT if timeout is None else timeout
    if ready is None:
        def ready(server):
            return listening(server.p.pid, port)
    a, b = topo.a, topo.b
    # Line-buffered: a tool killed at the timeout still shows how far it got.
    server = Proc(a.cmd("stdbuf", "-oL", *server_argv),
                  tmp_path / f"{tag}-server.log")
    deadline = time.monotonic() + timeout
    client = None
    try:
        while not ready(server):
            if server.p.poll() is not None:
                raise AssertionError(
                    f"{tag}: server exited {server.p.returncode} before "
                    f"listening:\n{server.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{tag}: server not listening after "
                                     f"{timeout}s:\n{server.output()}")
            time.sleep(0.05)
        to = [a.addr] if client_to_addr else []
        client = Proc(b.cmd("stdbuf", "-oL", *client_argv, *to),
                      tmp_path / f"{tag}-client.log")
        crc = client.wait(deadline - time.monotonic())
        src = server.wait(deadline - time.monotonic() + 5)
        msg = (f"{tag}: client exit {crc}, server exit {src} "
               f"(None: killed after {timeout}s)\n"
               f"--- client: {' '.join(client.argv)}\n{client.output()}\n"
               f"--- server: {' '.join(server.argv)}\n{server.output()}")
        assert crc == 0 and src == 0, msg
        if whole_logs:
            return client.log.read_text(), server.log.read_text()
        return client.output(), server.output()
    finally:
        server.kill()
        if client:
            client.kill()


# ---- perftest ----------------------------------------------------------------

def perftest_argv(tool, end, size, iters, port, extra=()):
    """perftest's tool on end's device; iters None: no -n (a -D run)."""
    return [tool, "-d", end.name, "-x", str(end.gid_index), "-c", "RC",
            "-s", str(size)] + (["-n", str(iters)] if iters else []) + \
        ["-p", str(port), "-F"] + list(extra)


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


class PerPost:
    """Syscalls per post at each end, from two strace'd runs."""

    def __init__(self, tool, n1, n2, calls, tables):
        self.tool, self.n1, self.n2 = tool, n1, n2
        self.calls, self.tables = calls, tables
        self.server = (calls[n2][0] - calls[n1][0]) / (n2 - n1)
        self.client = (calls[n2][1] - calls[n1][1]) / (n2 - n1)

    def report(self, kind, topo_id):
        t = self.tables
        return (f"{kind} {topo_id} {self.tool}: client {self.client:.3f} "
                f"syscalls/post, server {self.server:.3f} "
                f"syscalls/post (totals {self.calls}; grown: client "
                f"{growth(t[self.n1][1], t[self.n2][1])}, server "
                f"{growth(t[self.n1][0], t[self.n2][0])})")


def syscalls_per_post(topo, tool, ports, tmp_path, n1=200, n2=2200,
                      size=64, timeout=None):
    """Syscalls per post in steady state, from two runs of N1 and N2 posts
    at each end (the client posts the sends or writes, for ib_send_bw the
    server posts as many receives). ports: an iterator of TCP ports, one
    taken per run. Returns a PerPost; AssertionError if a run fails."""
    calls, tables = {}, {}
    for n in (n1, n2):
        port = next(ports)
        s_trace, c_trace = tmp_path / f"{tool}-s{n}", tmp_path / f"{tool}-c{n}"
        run_pair(topo,
                 strace_argv(s_trace, perftest_argv(tool, topo.a, size, n,
                                                    port)),
                 strace_argv(c_trace, perftest_argv(tool, topo.b, size, n,
                                                    port)),
                 port, tmp_path, f"strace-{tool}-{n}", timeout=timeout)
        calls[n] = (strace_calls(s_trace), strace_calls(c_trace))
        tables[n] = (strace_table(s_trace), strace_table(c_trace))
    return PerPost(tool, n1, n2, calls, tables)


# ---- UCX ---------------------------------------------------------------------

def ucx_version():
    """UCX's library version, from ucx_info -v."""
    out = subprocess.run(["ucx_info", "-v"], capture_output=True, text=True,
                         timeout=60, check=False).stdout
    m = re.search(r"Library version: (\S+)", out)
    return m.group(1) if m else "unknown version"


def ucx_has_verbs_transports():
    """Whether UCX's verbs transports (rc_verbs, ud_verbs: the uct_ib
    module) are installed. Debian sid's libucx0 1.23.0~rc1 ships without
    them (2026-12-06), so UCX there sees no RDMA device at all, srnic's,
    rxe's or a NIC's."""
    return bool(shutil.which("ucx_perftest")) and \
        bool(glob.glob("/usr/lib/*/ucx/libuct_ib.so*"))
