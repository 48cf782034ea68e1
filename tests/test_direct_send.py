# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --smp 2
"""The SEND half of the provider's direct path: a loan. An RC QP connected
to a QP of the same device borrows the destination's receive queue and
receive CQ (kernel/srnic_direct.c maps them into the posting process) and
delivers a small SEND itself: it takes the receive WQE, copies the payload
into the destination's buffers through receive windows, writes the receive
CQE and commits it by its owner byte (userspace/direct_path.cpp).

Each test checks what both consumers see (data, receive and send
completions, their order, nothing lost or doubled) and, through the device
counter direct_loans (one per loan the kernel granted), whether a loan was
taken at all; and that everything that makes the engine use the
destination's RQ or CQ again (the poster's own large SENDs, an empty RQ,
the destination entering the error state, a CQ resize, another QP on the
CQ) takes the committed work over exactly once.
"""
import itertools

import pytest

from harness import link_counters, module_param
from perftools import perftest_argv, run_pair
from topology import KIND, topology  # noqa: F401 (fixture)
from test_rc_local import RcEnd, connected_pairs, ex_post, fill, make_devices

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr  # noqa: E402
from pyverbs.wr import SGE, RecvWR, SendWR  # noqa: E402
from direct_path_peer import post_as_nobody  # noqa: E402

RECV_OFF = 0x8000          # b's receive buffers start here in its MR
ports = itertools.count(19100)


def loans(dev="srnic0"):
    """The device's direct_loans counter."""
    return link_counters(dev)["direct_loans"]


@pytest.fixture
def pair(srnic, veth):
    """make(split=True) -> two connected RcEnds on one srnic device, each
    with a receive CQ of its own (split) or one CQ for both sides."""
    with connected_pairs(make_devices(veth, two=False)) as make:
        def split_pair(split=True, **kw):
            return make(a={"split_cq": split, "buf": 0x20000, **kw},
                        b={"split_cq": split, "buf": 0x20000, **kw})
        yield split_pair


def post_recv(end, wr_id, pieces):
    """One receive WQE of end: pieces = [(offset, length)] in its MR."""
    end.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=len(pieces),
                            sg=[SGE(end.mr.buf + off, n, end.mr.lkey)
                                for off, n in pieces]))


def send(a, wr_id, length, src_off=0, imm=None, signaled=True):
    """Post one SEND (with immediate data if imm) of a's buffer."""
    w = SendWR(wr_id=wr_id,
               opcode=e.IBV_WR_SEND if imm is None else
               e.IBV_WR_SEND_WITH_IMM,
               num_sge=1, sg=[SGE(a.mr.buf + src_off, length, a.mr.lkey)],
               send_flags=e.IBV_SEND_SIGNALED if signaled else 0)
    if imm is not None:
        w.imm_data = imm
    a.qp.post_send(w)


def recv_wcs(b, count, timeout=10):
    return b.poll(count, timeout=timeout, cq=b.rcq)


def test_sends_built_with_the_wr_builders_take_a_loan(pair):
    """A batch of one SEND (with immediate data, or inline) through the
    ibv_wr_* builders of an extended QP takes a loan as post_send's does
    (perftest 25 posts so)."""
    a, b = pair(send_ops=e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_SEND_WITH_IMM)
    data = fill(a, 35)
    fill(b, 36)
    before = loans()
    for i in range(3):
        post_recv(b, 200 + i, [(RECV_OFF + 0x100 * i, 0x100)])
    for i, (imm, inline) in enumerate([(None, False), (0x0badcafe, False),
                                       (None, True)]):
        src = a.mr.buf + 40 * i
        ex_post(a, i, *(("send",) if imm is None else ("send_imm", imm)),
                sge=SGE(src, 40, a.mr.lkey), inline=inline and (src, 40))
        (wc,) = a.poll()
        assert (wc.status, wc.opcode, wc.wr_id) == \
            (e.IBV_WC_SUCCESS, e.IBV_WC_SEND, i)
        (rc,) = recv_wcs(b, 1)
        assert (rc.status, rc.wr_id, rc.byte_len) == \
            (e.IBV_WC_SUCCESS, 200 + i, 40)
        if imm is not None:
            assert rc.wc_flags & e.IBV_WC_WITH_IMM
        assert b.mr.read(40, RECV_OFF + 0x100 * i) == data[40 * i:40 * i + 40]
    assert loans() == before + 1


def test_small_sends_take_a_loan(pair):
    a, b = pair()
    data = fill(a, 31)
    fill(b, 32)
    before = loans()
    cases = [  # (length, source offset, receive SGEs, immediate)
        (8, 0, [(RECV_OFF, 64)], None),
        (4096, 100, [(RECV_OFF + 0x1000, 1000), (RECV_OFF + 0x3000, 4000)],
         None),
        (0, 0, [(RECV_OFF, 16)], 0x12345678),
        (1, 5000, [(RECV_OFF + 0x5000, 0), (RECV_OFF + 0x5100, 1)], 7),
    ]
    for i, (length, off, pieces, imm) in enumerate(cases):
        post_recv(b, 100 + i, pieces)
    for i, (length, off, pieces, imm) in enumerate(cases):
        send(a, i, length, src_off=off, imm=imm)
        (wc,) = a.poll()
        assert (wc.status, wc.opcode, wc.wr_id, wc.qp_num) == \
            (e.IBV_WC_SUCCESS, e.IBV_WC_SEND, i, a.qp.qp_num)
        (rc,) = recv_wcs(b, 1)
        assert (rc.status, rc.opcode, rc.wr_id, rc.byte_len, rc.qp_num,
                rc.src_qp) == (e.IBV_WC_SUCCESS, e.IBV_WC_RECV, 100 + i,
                               length, b.qp.qp_num, a.qp.qp_num)
        if imm is None:
            assert not rc.wc_flags & e.IBV_WC_WITH_IMM
        else:
            assert rc.wc_flags & e.IBV_WC_WITH_IMM
            assert rc.imm_data == imm
        got, want = b"", data[off:off + length]
        for poff, n in pieces:
            got += b.mr.read(n, poff)
        assert got[:length] == want
    # One loan for the connection, however many SENDs used it.
    assert loans() == before + 1
    # Nothing else completed, on either side.
    assert a.cq.poll(1)[0] == 0 and b.cq.poll(1)[0] == 0
    assert b.rcq.poll(1)[0] == 0


def test_engine_sends_between_direct_ones_keep_order(pair):
    """Large SENDs go to the engine, which takes the loan's work over
    before it uses the RQ; small ones go on directly: one loan, every
    receive in order, none twice."""
    a, b = pair()
    data = fill(a, 33)
    fill(b, 34)
    before = loans()
    lengths = [8, 6000, 16, 20000, 4096, 4097, 1, 9000, 2]
    for rnd in range(3):
        for i, n in enumerate(lengths):
            post_recv(b, 1000 * rnd + i, [(RECV_OFF + 0x8000 * (i % 2),
                                           0x8000)])
        for i, n in enumerate(lengths):
            send(a, 1000 * rnd + i, n, src_off=i * 64,
                 signaled=(i % 3 == 2 or i == len(lengths) - 1))
        sent = a.poll(3)
        assert [wc.wr_id for wc in sent] == \
            [1000 * rnd + i for i in (2, 5, 8)]
        assert all(wc.status == e.IBV_WC_SUCCESS for wc in sent)
        rcs = recv_wcs(b, len(lengths))
        assert [(rc.wr_id, rc.byte_len, rc.status) for rc in rcs] == \
            [(1000 * rnd + i, n, e.IBV_WC_SUCCESS)
             for i, n in enumerate(lengths)]
    # The last two receives' buffers hold the last two SENDs.
    assert b.mr.read(9000, RECV_OFF + 0x8000) == data[7 * 64:7 * 64 + 9000]
    assert b.mr.read(2, RECV_OFF) == data[8 * 64:8 * 64 + 2]
    assert loans() == before + 1
    assert b.rcq.poll(1)[0] == 0


def test_engine_takes_over_after_many_laps_of_the_rings(pair):
    """Hundreds of direct SENDs (many laps of b's 32-entry RQ and
    128-entry receive CQ) between two engine SENDs, then b in the error
    state: the engine takes up exactly where the poster left off."""
    a, b = pair()
    data = fill(a, 42)
    total = 0
    for rnd in range(3):
        for i in range(150):
            post_recv(b, total, [(RECV_OFF + 64 * (total % 32), 64)])
            send(a, total, 8, src_off=8 * (total % 64),
                 signaled=(i == 149))
            (rc,) = recv_wcs(b, 1)
            assert (rc.wr_id, rc.byte_len, rc.status) == \
                (total, 8, e.IBV_WC_SUCCESS)
            total += 1
        (wc,) = a.poll()
        assert (wc.wr_id, wc.status) == (total - 1, e.IBV_WC_SUCCESS)
        # One the engine delivers (longer than the direct path takes).
        post_recv(b, total, [(RECV_OFF + 0x8000, 0x8000)])
        send(a, total, 5000, src_off=rnd)
        (wc,) = a.poll()
        (rc,) = recv_wcs(b, 1)
        assert (wc.wr_id, rc.wr_id, rc.byte_len, rc.status) == \
            (total, total, 5000, e.IBV_WC_SUCCESS)
        assert b.mr.read(5000, RECV_OFF + 0x8000) == data[rnd:rnd + 5000]
        total += 1
    for i in range(100):
        post_recv(b, total, [(RECV_OFF + 64 * (total % 32), 64)])
        send(a, total, 8, signaled=False)
        (rc,) = recv_wcs(b, 1)
        assert rc.wr_id == total
        total += 1
    for i in range(5):
        post_recv(b, total + i, [(RECV_OFF + 64 * i, 64)])
    send(a, total, 8)
    a.poll()
    attr = QPAttr()
    attr.qp_state = e.IBV_QPS_ERR
    b.qp.modify(attr, e.IBV_QP_STATE)
    rcs = recv_wcs(b, 5)
    assert [(rc.wr_id, rc.status) for rc in rcs] == \
        [(total, e.IBV_WC_SUCCESS)] + \
        [(total + i, e.IBV_WC_WR_FLUSH_ERR) for i in range(1, 5)]
    assert b.rcq.poll(1)[0] == 0


def test_empty_receive_queue_waits_for_the_engine(pair):
    """No receive WQE: the SEND goes to the engine (RNR, retried), and
    lands once one is posted; direct SENDs go on after it."""
    a, b = pair()
    data = fill(a, 35)
    post_recv(b, 1, [(RECV_OFF, 64)])
    send(a, 1, 8)
    recv_wcs(b, 1)
    send(a, 2, 8, src_off=8)       # nothing posted: RNR
    assert b.rcq.poll(1)[0] == 0
    post_recv(b, 2, [(RECV_OFF + 64, 64)])
    post_recv(b, 3, [(RECV_OFF + 128, 64)])
    (rc,) = recv_wcs(b, 1)
    assert (rc.wr_id, rc.status) == (2, e.IBV_WC_SUCCESS)
    send(a, 3, 8, src_off=16)
    (rc,) = recv_wcs(b, 1)
    assert (rc.wr_id, rc.status) == (3, e.IBV_WC_SUCCESS)
    assert [wc.wr_id for wc in a.poll(3)] == [1, 2, 3]
    assert b.mr.read(8, RECV_OFF + 64) == data[8:16]
    assert b.mr.read(8, RECV_OFF + 128) == data[16:24]


def test_destination_error_flushes_what_was_not_delivered_once(pair):
    """Direct SENDs nobody polled, then the destination enters the error
    state: the receive CQ holds each delivered receive once, then each
    other posted receive flushed once, in order."""
    a, b = pair()
    fill(a, 36)
    for i in range(10):
        post_recv(b, i, [(RECV_OFF + 64 * i, 64)])
    for i in range(6):
        send(a, i, 8, src_off=8 * i, signaled=False)
    send(a, 6, 8, src_off=48)
    (wc,) = a.poll()
    assert (wc.wr_id, wc.status) == (6, e.IBV_WC_SUCCESS)
    attr = QPAttr()
    attr.qp_state = e.IBV_QPS_ERR
    b.qp.modify(attr, e.IBV_QP_STATE)
    rcs = recv_wcs(b, 10)
    got = [(rc.wr_id, int(rc.status)) for rc in rcs]
    want = [(i, int(e.IBV_WC_SUCCESS)) for i in range(7)] + \
        [(i, int(e.IBV_WC_WR_FLUSH_ERR)) for i in range(7, 10)]
    assert got == want, (f"receive completions {got}; counters "
                         f"{ {k: v for k, v in link_counters('srnic0').items() if v} }")
    assert b.rcq.poll(1)[0] == 0


def test_resizing_the_receive_cq_keeps_its_completions(pair):
    a, b = pair()
    data = fill(a, 37)
    for i in range(8):
        post_recv(b, i, [(RECV_OFF + 64 * i, 64)])
    for i in range(4):
        send(a, i, 8, src_off=8 * i)
    a.poll(4)
    b.rcq.resize(200)
    for i in range(4, 8):
        send(a, i, 8, src_off=8 * i)
    a.poll(4)
    rcs = recv_wcs(b, 8)
    assert [(rc.wr_id, rc.status) for rc in rcs] == \
        [(i, e.IBV_WC_SUCCESS) for i in range(8)]
    for i in range(8):
        assert b.mr.read(8, RECV_OFF + 64 * i) == data[8 * i:8 * i + 8]
    assert b.rcq.poll(1)[0] == 0


def test_another_qp_on_the_receive_cq_ends_the_loan(pair):
    """A QP created on the lent CQ completes to it through the engine:
    the loan ends first and no new one is granted; SENDs still land."""
    a, b = pair()
    data = fill(a, 38)
    for i in range(6):
        post_recv(b, i, [(RECV_OFF + 64 * i, 64)])
    send(a, 0, 8)
    a.poll()
    granted = loans()
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    third = QP(b.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=b.cq, rcq=b.rcq,
                                cap=cap), QPAttr(port_num=1))
    for i in range(1, 6):
        send(a, i, 8, src_off=8 * i)
    a.poll(5)
    rcs = recv_wcs(b, 6)
    assert [(rc.wr_id, rc.status) for rc in rcs] == \
        [(i, e.IBV_WC_SUCCESS) for i in range(6)]
    assert b.mr.read(8, RECV_OFF + 64 * 5) == data[40:48]
    assert loans() == granted
    third.close()


def test_no_loan_with_one_cq_for_both_sides(pair):
    a, b = pair(split=False)
    data = fill(a, 39)
    before = loans()
    post_recv(b, 5, [(RECV_OFF, 64)])
    send(a, 1, 8)
    wcs = a.poll()
    (rc,) = recv_wcs(b, 1)
    assert (wcs[0].wr_id, rc.wr_id, rc.byte_len) == (1, 5, 8)
    assert b.mr.read(8, RECV_OFF) == data[:8]
    assert loans() == before


def test_module_parameter_turns_loans_off(pair):
    with module_param("direct_send", 0):
        a, b = pair()
        data = fill(a, 40)
        before = loans()
        for i in range(3):
            post_recv(b, i, [(RECV_OFF + 64 * i, 64)])
            send(a, i, 8, src_off=8 * i)
        assert [wc.wr_id for wc in a.poll(3)] == [0, 1, 2]
        assert [rc.wr_id for rc in recv_wcs(b, 3)] == [0, 1, 2]
        assert b.mr.read(8, RECV_OFF + 128) == data[16:24]
        assert loans() == before


def test_no_loan_of_another_users_queues(pair):
    """A process of another user (uid 65534, no capabilities) may not
    borrow this process's RQ and CQ: its SEND goes through the engine and
    lands."""
    first, _ = pair()
    a = RcEnd("srnic0", first.gidx, split_cq=True,
              buf=0x20000)   # not connected yet
    fill(a, 41)
    post_recv(a, 77, [(RECV_OFF, 128)])
    try:
        result, before = post_as_nobody(a, "srnic0", "send", loans)
        (rc,) = a.poll(cq=a.rcq)
        data = a.mr.read(64, RECV_OFF)
    finally:
        a.close()
    assert (result["status"], result["opcode"]) == \
        (e.IBV_WC_SUCCESS, e.IBV_WC_SEND), result
    assert (rc.wr_id, rc.byte_len) == (77, 64)
    assert data == bytes(range(64))
    assert loans() == before, "a loan of another user's queues"


@pytest.mark.check_topologies("one-device")
def test_send_lat_with_a_full_receive_queue(topology, tmp_path):
    """ib_send_lat posts rx_depth (512) receives and reposts each the
    moment its completion is polled, more iterations than that: its RQ is
    full whenever it polls, so a receive completion that shows before the
    RQ's consumer index moves fails the repost ("Couldn't post recv").
    On one srnic device the SENDs take the direct path's loans
    (this suite), whose commit must move that index before the CQE
    shows, as the engine does. The race is narrow: several runs (with the
    CQE first, one run in four failed), on two CPUs (the suite's
    srnic-vm-run line): on one, the two polling tools take turns and 5000
    round trips take minutes."""
    if topology.id != "one-device":
        pytest.skip("the loans are one device's; the wire runs in "
                    "test_rc_tools.py's test_perftest")
    before = (link_counters(topology.a)["direct_loans"]
              if KIND == "srnic" else 0)
    runs = 8
    for i in range(runs):
        port = next(ports)
        out, _ = run_pair(topology,
                          perftest_argv("ib_send_lat", topology.a, 64, 5000,
                                        port),
                          perftest_argv("ib_send_lat", topology.b, 64, 5000,
                                        port),
                          port, tmp_path, f"full-rq-{i}")
        assert any(line.split()[:2] == ["64", "5000"]
                   for line in out.splitlines()), out
    if KIND == "srnic":
        # Two loans a run (each end sends to the other): the direct path
        # was the one under test.
        assert link_counters(topology.a)["direct_loans"] - before == \
            2 * runs
