# SPDX-License-Identifier: GPL-2.0
"""UC (unreliable connected) traffic through pyverbs over every topology
(tests/topology.py): SEND, SEND with immediate, RDMA WRITE and WRITE with
immediate, single- and multi-packet, payloads compared byte for byte; the
post errnos of what UC lacks (READ, atomics: EINVAL); a SEND that finds no
receive WQE is dropped (no RNR, no retry, the requester completes it) and
the next one is delivered; so is one longer than the receive WQE, which
stays for the next SEND; many messages arrive in order; and
ibv_uc_pingpong with -c (every received buffer checked).

Sizes stay at 64 packets or fewer: UC never sends anything again, so a
burst that overflows a queue on the way (veth's backlog, rxe's) would be a
real loss, which is test_uc_loss.py's subject, not this suite's.

The suite's wire must also keep a QP's packets in order, as a link does:
a veth does not by itself. veth's transmit hands each packet to the
receive backlog of the CPU it is sent from (netif_rx()); a sending thread
that moves to the other CPU in the middle of a message, while the first
CPU's backlog waits for its ksoftirqd, has its later packets delivered
first. The responder then counts rx_out_of_sequence, drops the message
(rx_drop_uc_message) and the overtaken packets (rx_duplicate_requests),
as UC must (Documentation/reliability.rst, "Sixth run": a third of the
65539-byte WRITEs under the debug kernel). So the fixture turns on receive
packet steering on every veth end (topology.steer_flows_in_order()): a
flow's packets then take one CPU's backlog whichever CPU sends them, as a
NIC's RSS queue keeps them. Reordering itself is test_uc_loss.py's subject.

Run against rxe to validate the suite: SRNIC_TEST_DEVICE_KIND=rxe.
"""
import errno
import itertools
import random

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402

import harness  # noqa: E402
import topology as topo_mod  # noqa: E402
from perftools import run_pair  # noqa: E402
from rc_verbs import (WC_TIMEOUT, RCPair, check_ok, check_send,  # noqa: E402
                      check_write, close_all, recv_wr, send_wr, sge)
from topology import topology  # noqa: E402,F401 (fixture)

SIZES = [1, 63, 1024, 4097, 65536 + 3]
rng = random.Random(0x0c0c)
ports = itertools.count(18900)


def payload(n):
    return rng.randbytes(n)


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


UC_COUNTERS = ("rx_packets", "rx_out_of_sequence", "rx_duplicate_requests",
               "rx_drop_uc_message", "rx_drop_queue_full",
               "rx_drop_no_recv_wqe")


def uc_counters(end):
    """The counters that tell a lost, reordered or dropped UC message
    (srnic's names; an rxe end has others: then none)."""
    counters = harness.link_counters(end)
    return {k: counters[k] for k in UC_COUNTERS if k in counters}


@pytest.fixture
def uc(topology):
    topo_mod.steer_flows_in_order(topology)
    p = RCPair(topology, qp_type=e.IBV_QPT_UC)
    p.connect()
    yield p
    p.close()


def test_qp_type(uc):
    for side in uc.sides():
        _, init = side.qp.query(e.IBV_QP_CAP)
        assert init.qp_type == e.IBV_QPT_UC
        assert side.state() == e.IBV_QPS_RTS


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("imm", [False, True], ids=["send", "send_imm"])
def test_send(uc, size, imm):
    check_send(uc, payload(size), imm)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("imm", [False, True], ids=["write", "write_imm"])
def test_rdma_write(uc, size, imm):
    b = uc.b
    before = uc_counters(b.end)

    def landed(dst, data):
        # No completion at the responder: wait for the bytes (as long as
        # for a completion: SRNIC_TEST_WC_TIMEOUT).
        try:
            harness.wait_for(lambda: dst.read(len(data), 64) == data,
                             timeout=WC_TIMEOUT,
                             what="the WRITE's bytes to land")
        except AssertionError as ex:
            after = uc_counters(b.end)
            raise AssertionError(
                f"{ex}; {b.end.name} counters during the wait: "
                f"{ {k: after[k] - before[k] for k in after} }") from ex

    check_write(uc, payload(size), imm, landed)


@pytest.mark.parametrize("opcode", [e.IBV_WR_RDMA_READ,
                                    e.IBV_WR_ATOMIC_CMP_AND_SWP,
                                    e.IBV_WR_ATOMIC_FETCH_AND_ADD],
                         ids=["read", "cmp_swap", "fetch_add"])
def test_post_unsupported_opcode(uc, opcode):
    """UC has no READ and no atomics: ibv_post_send fails with EINVAL and
    nothing is sent. On an srnic side: rxe's provider (rdma-core 44) posts
    them and fails them later."""
    srnic = [s for s in uc.sides() if s.end.kind == "srnic"]
    if not srnic:
        pytest.skip("rxe's provider does not refuse them at post")
    a = srnic[-1]
    b = uc.peer(a)
    local, remote = a.mr(8), b.mr(8)
    wr = send_wr(3, opcode, [sge(local)], remote=(remote, 0))
    if opcode != e.IBV_WR_RDMA_READ:
        wr.set_wr_atomic(remote.rkey, remote.buf, 1, 2)
    with pytest.raises(PyverbsRDMAError) as ex:
        a.qp.post_send(wr)
    assert ex.value.error_code == errno.EINVAL, ex.value
    assert not a.drain(settle=0.05)
    assert a.state() == e.IBV_QPS_RTS


def test_send_without_recv_wqe_dropped(uc):
    """No RNR on UC: a SEND with no receive WQE is dropped silently, the
    requester's completion is a success, and the next SEND is delivered."""
    a, b = uc.a, uc.b
    first, second = payload(3000), payload(3000)
    src1, src2 = a.mr(3000), a.mr(3000)
    src1.write(first, 3000)
    src2.write(second, 3000)
    dst = b.mr(4096)
    a.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(src1)]))
    check_ok(a.poll()[0], 1, e.IBV_WC_SEND)
    assert not b.drain(settle=0.2)
    b.qp.post_recv(recv_wr(9, [sge(dst)]))
    a.qp.post_send(send_wr(2, e.IBV_WR_SEND, [sge(src2)]))
    check_ok(a.poll()[0], 2, e.IBV_WC_SEND)
    check_ok(b.poll()[0], 9, e.IBV_WC_RECV, 3000)
    assert dst.read(3000, 0) == second
    for side in uc.sides():
        assert side.state() == e.IBV_QPS_RTS


@pytest.mark.parametrize("buf,size", [(16, 100), (1024, 5000)],
                         ids=["one_packet", "multi_packet"])
def test_send_longer_than_recv_dropped(uc, buf, size):
    """A SEND longer than the receive WQE's buffer is dropped (IBTA's
    unreliable services, rxe's RESPST_ERR_LENGTH for UC): no receive
    completion, the QP stays in RTS, and the WQE stays posted for the next
    SEND, which fits and is delivered into it. (It used to move srnic's UC
    responder to the error state.) Not on an rxe responder: rxe 6.1's
    copy_data() fails a too-long SEND with -EINVAL, not the -ENOSPC that
    leads to its UC length path (RESPST_ERR_LENGTH: drop), so it takes the
    malformed-WQE path instead (class A: a receive completion in error,
    the QP to the error state)."""
    a, b = uc.a, uc.b
    if b.end.kind == "rxe":
        pytest.skip("rxe 6.1 reaches RESPST_ERR_MALFORMED_WQE, not its UC "
                    "length path (copy_data() returns -EINVAL)")
    long_msg, short_msg = payload(size), payload(buf)
    src = a.mr(size + buf)
    src.write(long_msg, size, 0)
    src.write(short_msg, buf, size)
    dst = b.mr(buf)
    before = harness.link_counters(b.end) if b.end.kind == "srnic" else None
    b.qp.post_recv(recv_wr(9, [sge(dst)]))
    a.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(src, 0, size)]))
    check_ok(a.poll()[0], 1, e.IBV_WC_SEND)
    assert not b.drain(settle=0.2)
    assert b.state() == e.IBV_QPS_RTS
    a.qp.post_send(send_wr(2, e.IBV_WR_SEND, [sge(src, size, buf)]))
    check_ok(a.poll()[0], 2, e.IBV_WC_SEND)
    check_ok(b.poll()[0], 9, e.IBV_WC_RECV, buf)
    assert dst.read(buf, 0) == short_msg
    for side in uc.sides():
        assert side.state() == e.IBV_QPS_RTS
    if before is not None:
        after = harness.link_counters(b.end)
        assert after["rx_drop_uc_message"] > before["rx_drop_uc_message"]


def test_messages_in_order(uc):
    """Many multi-packet SENDs back to back (fewer than the receive WQEs
    posted) arrive complete and in posting order."""
    a, b = uc.a, uc.b
    n, size = 48, 2 * (128 << uc.mtu) + 17     # three packets each
    msgs = [payload(size) for _ in range(n)]
    src, dst = a.mr(n * size), b.mr(n * size)
    for i, m in enumerate(msgs):
        src.write(m, size, i * size)
    for i in range(n):
        b.qp.post_recv(recv_wr(100 + i, [sge(dst, i * size, size)]))
    for i in range(n):
        a.qp.post_send(send_wr(i, e.IBV_WR_SEND, [sge(src, i * size, size)]))
    sent = a.poll(n)
    assert [wc.wr_id for wc in sent] == list(range(n))
    got = b.poll(n)
    assert [wc.wr_id for wc in got] == [100 + i for i in range(n)]
    for i, m in enumerate(msgs):
        assert got[i].status == e.IBV_WC_SUCCESS
        assert dst.read(size, i * size) == m, f"message {i}"


@pytest.mark.parametrize("size", [1, 4096])
def test_uc_pingpong(topology, size, tmp_path):
    topo_mod.steer_flows_in_order(topology)
    port = next(ports)
    iters = 100

    def argv(end):
        return ["ibv_uc_pingpong", "-d", end.name, "-g", str(end.gid_index),
                "-s", str(size), "-n", str(iters), "-r", "16", "-p",
                str(port), "-c"]

    out, _ = run_pair(topology, argv(topology.a), argv(topology.b), port,
                      tmp_path, f"uc-pingpong-{size}")
    assert f"{iters} iters" in out, out
