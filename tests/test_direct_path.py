# SPDX-License-Identifier: GPL-2.0
"""The provider's direct path: an RDMA WRITE between two RC QPs of one
device is copied by the posting process itself into a "direct window" (the
destination MR mapped into it by the kernel, kernel/srnic_direct.c) and
completed without the engine (userspace/direct_path.h).

Each test checks what a consumer sees (data, completions, their order,
errors) and, through the device counter direct_windows (one per window the
kernel granted), whether the direct path was taken at all; and that every
change which makes the engine refuse a WRITE (MR deregistered, destination
in the error state or without remote write) stops the direct path at once.
"""
import ctypes
import mmap

import pytest

from harness import link_counters, module_param, wait_for
from test_rc_local import (ACCESS, BUF, RcEnd, connected_pairs, ex_post,
                           fill, make_devices)

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.qp import QPAttr  # noqa: E402
from pyverbs.wr import SGE, SendWR  # noqa: E402
from direct_path_peer import post_as_nobody  # noqa: E402



def windows(dev="srnic0"):
    """The device's direct_windows counter."""
    return link_counters(dev)["direct_windows"]


@pytest.fixture
def pair(srnic, veth):
    """make() -> two connected RcEnds on one srnic device."""
    with connected_pairs(make_devices(veth, two=False)) as make:
        yield make


def write(a, b, wr_id, length, src_off=0, dst_off=0, rkey=None, dst=None,
          signaled=True):
    """Post one RDMA WRITE of a's buffer into b's MR (or dst, an address)."""
    w = SendWR(wr_id=wr_id, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
               sg=[SGE(a.mr.buf + src_off, length, a.mr.lkey)],
               send_flags=e.IBV_SEND_SIGNALED if signaled else 0)
    w.set_wr_rdma(b.mr.rkey if rkey is None else rkey,
                  (b.mr.buf if dst is None else dst) + dst_off)
    a.qp.post_send(w)


def test_small_writes_take_the_direct_path(pair):
    a, b = pair()
    data = fill(a, 11)
    fill(b, 12)
    before = windows()
    for i, (length, off) in enumerate([(8, 0), (4096, 100), (1, 5000),
                                       (600, 8191)]):
        write(a, b, i, length, src_off=off, dst_off=off + 3)
        (wc,) = a.poll()
        assert (wc.status, wc.opcode, wc.wr_id, wc.qp_num) == \
            (e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE, i, a.qp.qp_num)
        assert b.mr.read(length, off + 3) == data[off:off + length]
    # One window for the one R_Key, however many WRITEs used it.
    assert windows() == before + 1
    # Nothing else completed, on either side.
    assert a.cq.poll(1)[0] == 0 and b.cq.poll(1)[0] == 0


def test_writes_built_with_the_wr_builders_take_the_direct_path(pair):
    """perftest 25 (Debian 13, sid) posts through the ibv_wr_* builders of
    an extended QP: a batch of one small WRITE, from an SGE or inline, takes
    the direct path as post_send's does; a batch of two goes to the engine
    (in order), the window unused."""
    a, b = pair(a={"send_ops": e.IBV_QP_EX_WITH_RDMA_WRITE})
    data = fill(a, 17)
    fill(b, 18)
    before = windows()
    for i, inline in enumerate([False, True, False]):
        src = a.mr.buf + 64 * i
        ex_post(a, i, "rdma_write", b.mr.rkey, b.mr.buf + 64 * i,
                sge=SGE(src, 64, a.mr.lkey), inline=inline and (src, 64))
        (wc,) = a.poll()
        assert (wc.status, wc.opcode, wc.wr_id) == \
            (e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE, i)
    assert b.mr.read(192, 0) == data[:192]
    assert windows() == before + 1
    # Two in one batch: the engine's, both completed in order.
    a.qp.wr_start()
    for i in (3, 4):
        a.qp.wr_id = i
        a.qp.wr_flags = e.IBV_SEND_SIGNALED
        a.qp.wr_rdma_write(b.mr.rkey, b.mr.buf + 64 * i)
        a.qp.wr_set_sge(SGE(a.mr.buf + 64 * i, 64, a.mr.lkey))
    a.qp.wr_complete()
    assert [wc.wr_id for wc in a.poll(2)] == [3, 4]
    assert b.mr.read(320, 0) == data[:320]
    assert a.cq.poll(1)[0] == 0 and b.cq.poll(1)[0] == 0


def test_direct_completions_read_through_an_extended_cq(pair):
    """A send CQ from ibv_create_cq_ex (perftest 25 makes them) lets the
    direct path complete into it too: start_poll/next_poll return the
    direct completion, then an engine's (a READ) behind it, in order."""
    a, b = pair(a={"cq_ex": True})
    data = fill(a, 19)
    fill(b, 20)
    before = windows()
    write(a, b, 1, 64)
    (wc,) = a.poll()
    assert (wc.wr_id, wc.status, wc.opcode) == \
        (1, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE)
    assert windows() == before + 1
    r = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
               sg=[SGE(a.mr.buf + 8192, 64, a.mr.lkey)],
               send_flags=e.IBV_SEND_SIGNALED)
    r.set_wr_rdma(b.mr.rkey, b.mr.buf)
    a.qp.post_send(r)
    write(a, b, 3, 64, src_off=64, dst_off=64)
    assert [(wc.wr_id, wc.status) for wc in a.poll(2)] == \
        [(2, e.IBV_WC_SUCCESS), (3, e.IBV_WC_SUCCESS)]
    assert a.mr.read(64, 8192) == data[:64]
    assert b.mr.read(128, 0) == data[:128]


def test_unsignaled_direct_writes_then_engine_ops_complete_in_order(pair):
    a, b = pair()
    data = fill(a, 13)
    fill(b, 14)
    # Unsignaled WRITEs (direct), a READ (engine), then WRITEs behind it
    # in the same chain (the engine, in order), all in one post.
    wrs = []
    for i in range(4):
        w = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                   sg=[SGE(a.mr.buf + 64 * i, 64, a.mr.lkey)],
                   send_flags=e.IBV_SEND_SIGNALED if i in (1, 3) else 0)
        w.set_wr_rdma(b.mr.rkey, b.mr.buf + 64 * i)
        wrs.append(w)
    r = SendWR(wr_id=10, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
               sg=[SGE(a.mr.buf + 8192, 256, a.mr.lkey)],
               send_flags=e.IBV_SEND_SIGNALED)
    r.set_wr_rdma(b.mr.rkey, b.mr.buf)
    chain = wrs[:2] + [r] + wrs[2:]
    for first, second in zip(chain, chain[1:]):
        first.next_wr = second
    a.qp.post_send(chain[0])
    wcs = a.poll(3)
    assert [(wc.wr_id, wc.status) for wc in wcs] == \
        [(1, e.IBV_WC_SUCCESS), (10, e.IBV_WC_SUCCESS), (3, e.IBV_WC_SUCCESS)]
    # The READ saw the two WRITEs posted before it, not those after it.
    assert a.mr.read(128, 8192) == data[:128]
    assert b.mr.read(256, 0) == data[:256]


def test_completions_keep_order_with_the_engine(pair):
    a, b = pair()
    data = fill(a, 15)
    fill(b, 16)
    # Two batches of 10 rounds: 20 WRs fit the 32-entry SQ however slowly
    # the engine retires them.
    for batch in range(2):
        for rnd in range(10 * batch, 10 * batch + 10):
            # A READ the engine serves, then a WRITE posted right behind
            # it: with the READ in flight the WRITE must queue behind it.
            r = SendWR(wr_id=2 * rnd, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                       sg=[SGE(a.mr.buf + 8192, 16, a.mr.lkey)],
                       send_flags=e.IBV_SEND_SIGNALED)
            r.set_wr_rdma(b.mr.rkey, b.mr.buf + 4096)
            a.qp.post_send(r)
            write(a, b, 2 * rnd + 1, 8, src_off=8 * rnd, dst_off=8 * rnd)
        wcs = a.poll(20)
        assert [wc.wr_id for wc in wcs] == list(range(20 * batch,
                                                      20 * batch + 20))
        assert all(wc.status == e.IBV_WC_SUCCESS for wc in wcs)
    assert b.mr.read(160, 0) == data[:160]


def test_errors_are_the_engines(pair):
    a, b = pair()
    fill(a, 17)
    # Beyond the MR: a remote access error, as the engine reports it.
    write(a, b, 1, 16, dst_off=BUF - 8)
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR

    a, b = pair()
    # A local SGE under a wrong lkey: a local protection error.
    w = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
               sg=[SGE(a.mr.buf, 16, a.mr.lkey ^ 0x100)],
               send_flags=e.IBV_SEND_SIGNALED)
    w.set_wr_rdma(b.mr.rkey, b.mr.buf)
    a.qp.post_send(w)
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_LOC_PROT_ERR


def test_dereg_of_the_destination_mr_stops_the_direct_path(pair):
    a, b = pair()
    data = fill(a, 18)
    # b's second MR, on memory that stays mapped after its dereg.
    size = 2 * mmap.PAGESIZE
    buf = mmap.mmap(-1, size)
    buf[:] = b"\x5a" * size
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    mr = MR(b.pd, size, ACCESS, address=addr)
    rkey = mr.rkey
    write(a, b, 1, 32, rkey=rkey, dst=addr)
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_SUCCESS
    assert buf[:32] == data[:32]
    granted = windows()

    mr.close()
    buf[:] = b"\x5a" * size
    write(a, b, 2, 32, src_off=64, rkey=rkey, dst=addr)
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR
    assert buf[:] == b"\x5a" * size, "a WRITE landed in a deregistered MR"
    assert windows() == granted


def test_destination_losing_remote_write_stops_the_direct_path(pair):
    a, b = pair()
    data = fill(a, 19)
    write(a, b, 1, 8)
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_SUCCESS
    # b takes REMOTE_WRITE back (RTS to RTS); a's next WRITE is refused.
    attr = QPAttr()
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ
    b.qp.modify(attr, e.IBV_QP_ACCESS_FLAGS)
    before = b.mr.read(16, 0)
    write(a, b, 2, 16, src_off=100)
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_REM_INV_REQ_ERR
    assert b.mr.read(16, 0) == before
    assert before[:8] == data[:8]


def test_destination_in_error_stops_the_direct_path(pair):
    a, b = pair()
    fill(a, 20)
    write(a, b, 1, 8)
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_SUCCESS
    attr = QPAttr()
    attr.qp_state = e.IBV_QPS_ERR
    b.qp.modify(attr, e.IBV_QP_STATE)
    before = b.mr.read(16, 0)
    write(a, b, 2, 16, src_off=200)
    # Nobody answers: the requester retries, then gives up.
    (wc,) = a.poll(timeout=30)
    assert wc.status == e.IBV_WC_RETRY_EXC_ERR
    assert b.mr.read(16, 0) == before


def test_module_parameter_turns_the_direct_path_off(pair):
    with module_param("direct_path", 0):
        a, b = pair()
        data = fill(a, 21)
        before = windows()
        for i in range(3):
            write(a, b, i, 8, src_off=8 * i, dst_off=8 * i)
            (wc,) = a.poll()
            assert wc.status == e.IBV_WC_SUCCESS
        assert b.mr.read(24, 0) == data[:24]
        assert windows() == before
    # With it on again, a new connection takes it.
    a, b = pair()
    write(a, b, 9, 8)
    (wc,) = a.poll()
    assert wc.status == e.IBV_WC_SUCCESS
    wait_for(lambda: windows() == before + 1, timeout=5,
             what="a direct window")


def test_no_window_into_another_users_memory(pair):
    """A process of another user (uid 65534, no capabilities) may not map
    this process's MR: its WRITE goes through the engine, and lands."""
    first, _ = pair()
    a = RcEnd("srnic0", first.gidx)   # not connected yet
    fill(a, 22)
    try:
        result, before = post_as_nobody(a, "srnic0", "write", windows)
    finally:
        data = a.mr.read(64, 0)
        a.close()
    assert (result["status"], result["opcode"]) == \
        (e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE), result
    assert data == bytes(range(64))
    assert windows() == before, "a window into another user's memory"
