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

import pytest

from harness import engine_wakeups
from perftools import TOOL_TIMEOUT, perftest_argv, run_pair, syscalls_per_post
from topology import KIND, topology  # noqa: F401 (fixture)

MiB = 1 << 20
ports = itertools.count(18600)


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


@pytest.mark.check_topologies("veth-two-netns")
def test_wire_ping_pong_wakes_no_engine_thread(topology, tmp_path):
    """Between two srnic devices over the wire, a ping-pong's messages
    wake no engine thread: each end's doorbell syscall sends
    (srnic_engine_task_run_here()) and each received packet, the message
    and its ACK, is processed in the receiving softirq
    (srnic_engine_task_kick(): a user QP reached over the wire may run
    there), and the SQ is not taken for a stream's (srnic_sq_stream_check()).
    Before, every received packet was handed to an engine thread: two
    wake-ups per round trip. A few remain, and vary: 24 to 144 for 2000
    round trips in eight runs of 0ec5d73 and the commit after it, so the
    limit is one in five round trips, ten times below the old cost."""
    if KIND != "srnic" or topology.id != "veth-two-netns":
        pytest.skip("two srnic devices on the wire")
    port = next(ports)
    iters = 2000

    def argv(end):
        return ["ibv_rc_pingpong", "-d", end.name, "-g", str(end.gid_index),
                "-s", "64", "-n", str(iters), "-p", str(port), "-c"]

    before = engine_wakeups()
    out, _ = run_pair(topology, argv(topology.a), argv(topology.b), port,
                      tmp_path, "pingpong-wakeups")
    woken = engine_wakeups() - before
    print(f"{woken} engine wake-ups for {iters} round trips")
    assert f"{iters} iters" in out, out
    assert woken < iters / 5, f"{woken} engine wake-ups for {iters} " \
        "round trips"


# ---- perftest ----------------------------------------------------------------

TOOLS = ["ib_send_bw", "ib_write_bw", "ib_read_bw",
         "ib_send_lat", "ib_write_lat", "ib_read_lat"]


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

# Syscalls per post on an srnic end. A stream makes none: its doorbells
# hand the SQ to the engine, which polls it (kernel/srnic_qp.c,
# srnic_sq_doorbell()). A ping-pong (ib_write_lat, ib_send_lat: each post
# answers a message received) rings once per post, the doorbell doing the
# requester's work in the syscall as rxe does, and never more than once.
STREAM_TARGET = 0.01
PING_PONG_TARGET = 1.02


# make check: srnic's end with an rxe peer posts as it does with an srnic
# peer (the doorbell rule sees only its own QP), and the tools under strace
# with rxe at the other end took a third of the suite's time.
@pytest.mark.check_topologies("one-device", "veth-two-netns")
@pytest.mark.parametrize("tool", ["ib_write_bw", "ib_send_bw", "ib_read_bw",
                                  "ib_write_lat", "ib_send_lat",
                                  "ib_read_lat"])
def test_syscalls_per_post(topology, tool, tmp_path):
    """Syscalls per post in steady state (perftools.syscalls_per_post):
    every srnic end, sender and receiver, of a stream stays below
    STREAM_TARGET, of a ping-pong below PING_PONG_TARGET; rxe's ends (one
    write() per post_send) are recorded, not judged."""
    ping_pong = tool in ("ib_write_lat", "ib_send_lat")
    target = PING_PONG_TARGET if ping_pong else STREAM_TARGET

    def measure():
        if tool.endswith("_lat"):
            # Ping-pong under strace, over the TCG wire, on a loaded host: a
            # round trip can take milliseconds, so fewer, more time.
            per_post = syscalls_per_post(topology, tool, ports, tmp_path,
                                         n1=100, n2=1100,
                                         timeout=max(TOOL_TIMEOUT, 240))
        else:
            per_post = syscalls_per_post(topology, tool, ports, tmp_path)
        report = per_post.report(KIND, topology.id)
        print(report)
        results = os.environ.get("SRNIC_RESULTS")
        if results and os.path.isdir(results):
            with open(os.path.join(results, "rc-syscalls-per-post.txt"),
                      "a") as f:
                f.write(report + "\n")
        over = [f"{end.name}: {report}" for end, value in
                ((topology.a, per_post.server), (topology.b, per_post.client))
                if end.kind == "srnic" and value >= target]
        return over

    # A stream's engine polls the SQ while the posts keep coming; a stall
    # of the TCG guest (seconds of another suite's work, a busy host) can
    # break one stream into a few dozen doorbells. Once: measured again,
    # and the second must hold (both are printed).
    over = measure()
    if over:
        over = measure()
    assert not over, over
