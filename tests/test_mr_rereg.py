# SPDX-License-Identifier: GPL-2.0
"""ibv_rereg_mr (kernel srnic_rereg_user_mr()): IBV_REREG_MR_CHANGE_ACCESS,
_PD and _TRANSLATION, each checked by traffic over a connected RC pair
(one device, and two devices in two netns): lkey and rkey stay the same,
the new access / PD / range is what the data path enforces afterwards,
and a refused rereg leaves the MR as it was.

rxe (SRNIC_TEST_DEVICE_KIND=rxe) has no rereg_mr on 6.1: those tests skip.
"""
import errno

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.mem_alloc import free, posix_memalign  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402

import topology as topo_mod  # noqa: E402
from rc_verbs import (ERR, RESET, RCPair, close_all, recv_wr, send_wr,  # noqa: E402
                      sge, status_name)

LOCAL = e.IBV_ACCESS_LOCAL_WRITE
REMOTE_WRITE = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
SIZE = 4096 + 100


@pytest.fixture(scope="module",
                params=[t for t in ("one-device", "veth-two-netns")
                        if not topo_mod.SELECTED or t in topo_mod.SELECTED])
def topology(request):
    topo, veth = topo_mod.build(request.param)
    yield topo
    topo_mod.teardown(topo, veth)


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


@pytest.fixture
def rc(topology):
    p = RCPair(topology)
    p.connect()
    yield p
    p.close()


def rereg(mr, flags, pd, addr=0, length=0, access=0):
    try:
        mr.rereg(flags, pd, addr, length, access)
    except PyverbsRDMAError as ex:
        if ex.error_code == errno.EOPNOTSUPP and topo_mod.KIND == "rxe":
            pytest.skip("rxe: no rereg_mr")
        raise


def write(rc, src, dst_rkey, dst_addr, length, wr_id=1):
    """RDMA WRITE from side a; a's completion."""
    wr = send_wr(wr_id, e.IBV_WR_RDMA_WRITE, [sge(src, 0, length)])
    wr.set_wr_rdma(dst_rkey, dst_addr)
    rc.a.qp.post_send(wr)
    return rc.a.poll()[0]


def reconnect(rc):
    """After a fatal error: both QPs reach the error state (the responder
    on its own, after its NAK), then start over from RESET."""
    for side in rc.sides():
        side.wait_state(ERR)
    for side in rc.sides():
        rc.move(side, RESET)
    rc.connect()


def status(wc):
    return status_name(wc.status)


def test_access_grant_keeps_keys(rc):
    src = rc.a.mr(SIZE)
    src.write(b"g" * SIZE, SIZE)
    dst = rc.b.mr(SIZE, LOCAL)
    keys = (dst.lkey, dst.rkey)
    rereg(dst, e.IBV_REREG_MR_CHANGE_ACCESS, rc.b.pd, access=REMOTE_WRITE)
    assert (dst.lkey, dst.rkey) == keys
    wc = write(rc, src, dst.rkey, dst.buf, SIZE)
    assert wc.status == e.IBV_WC_SUCCESS, status(wc)
    assert dst.read(SIZE, 0) == b"g" * SIZE


def test_access_revoke(rc):
    """rdma-core's test_mr_rereg_access_bad_flow: remote write works, then
    not once the MR is local only."""
    src = rc.a.mr(SIZE)
    dst = rc.b.mr(SIZE, REMOTE_WRITE)
    src.write(b"1" * SIZE, SIZE)
    wc = write(rc, src, dst.rkey, dst.buf, SIZE)
    assert wc.status == e.IBV_WC_SUCCESS, status(wc)
    rereg(dst, e.IBV_REREG_MR_CHANGE_ACCESS, rc.b.pd, access=LOCAL)
    src.write(b"2" * SIZE, SIZE)
    wc = write(rc, src, dst.rkey, dst.buf, SIZE, wr_id=2)
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, status(wc)
    assert dst.read(SIZE, 0) == b"1" * SIZE


def test_pd_change_and_back(rc):
    """rdma-core's test_mr_rereg_pd: a receive buffer in another PD than
    the QP's fails the SEND (REM_OP_ERR at the sender, LOC_PROT_ERR at
    the receiver); back in the QP's PD it works again."""
    src = rc.a.mr(64)
    src.write(b"p" * 64, 64)
    dst = rc.b.mr(64, LOCAL)
    keys = (dst.lkey, dst.rkey)
    other = PD(rc.b.ctx)
    rereg(dst, e.IBV_REREG_MR_CHANGE_PD, other)
    assert (dst.lkey, dst.rkey) == keys
    rc.b.qp.post_recv(recv_wr(5, [sge(dst)]))
    rc.a.qp.post_send(send_wr(6, e.IBV_WR_SEND, [sge(src)]))
    wc = rc.a.poll()[0]
    assert wc.status == e.IBV_WC_REM_OP_ERR, status(wc)
    wc = rc.b.poll()[0]
    assert wc.wr_id == 5 and wc.status == e.IBV_WC_LOC_PROT_ERR, status(wc)

    reconnect(rc)
    rereg(dst, e.IBV_REREG_MR_CHANGE_PD, rc.b.pd)
    rc.b.qp.post_recv(recv_wr(7, [sge(dst)]))
    rc.a.qp.post_send(send_wr(8, e.IBV_WR_SEND, [sge(src)]))
    wc = rc.a.poll()[0]
    assert wc.status == e.IBV_WC_SUCCESS, status(wc)
    wc = rc.b.poll()[0]
    assert wc.wr_id == 7 and wc.status == e.IBV_WC_SUCCESS, status(wc)
    assert dst.read(64, 0) == b"p" * 64
    # The MR leaves for the other PD again: that PD, not the first, holds
    # it now (closing the pair closes both).
    rereg(dst, e.IBV_REREG_MR_CHANGE_PD, other)


def test_translation(rc):
    """A new range under the same keys: writes land in the new buffer; the
    old range is outside the MR."""
    src = rc.a.mr(SIZE)
    src.write(b"t" * SIZE, SIZE)
    dst = rc.b.mr(SIZE, REMOTE_WRITE)
    old_addr = dst.buf
    keys = (dst.lkey, dst.rkey)
    new_len = 3 * 4096 + 17
    new_addr = posix_memalign(new_len)
    try:
        rereg(dst, e.IBV_REREG_MR_CHANGE_TRANSLATION, rc.b.pd,
              addr=new_addr, length=new_len)
        assert (dst.lkey, dst.rkey) == keys
        assert dst.buf == new_addr
        wc = write(rc, src, dst.rkey, new_addr + new_len - SIZE, SIZE)
        assert wc.status == e.IBV_WC_SUCCESS, status(wc)
        assert dst.read(SIZE, new_len - SIZE) == b"t" * SIZE
        wc = write(rc, src, dst.rkey, old_addr, 64, wr_id=2)
        assert wc.status == e.IBV_WC_REM_ACCESS_ERR, status(wc)
    finally:
        dst.close()
        free(new_addr)


def test_translation_stale_receive(rc):
    """rdma-core's test_mr_rereg_addr: a receive posted with the old range
    fails after the rereg (REM_OP_ERR); new receives work."""
    src = rc.a.mr(64)
    src.write(b"r" * 64, 64)
    dst = rc.b.mr(64, LOCAL)
    rc.b.qp.post_recv(recv_wr(1, [sge(dst)]))
    new_addr = posix_memalign(64)
    try:
        rereg(dst, e.IBV_REREG_MR_CHANGE_TRANSLATION, rc.b.pd,
              addr=new_addr, length=64)
        rc.a.qp.post_send(send_wr(2, e.IBV_WR_SEND, [sge(src)]))
        wc = rc.a.poll()[0]
        assert wc.status == e.IBV_WC_REM_OP_ERR, status(wc)
        reconnect(rc)
        rc.b.drain()
        rc.b.qp.post_recv(recv_wr(3, [sge(dst)]))
        rc.a.qp.post_send(send_wr(4, e.IBV_WR_SEND, [sge(src)]))
        wc = rc.a.poll()[0]
        assert wc.status == e.IBV_WC_SUCCESS, status(wc)
        assert rc.b.poll()[0].status == e.IBV_WC_SUCCESS
        assert dst.read(64, 0) == b"r" * 64
    finally:
        dst.close()
        free(new_addr)


def test_all_three_at_once(rc):
    src = rc.a.mr(SIZE)
    src.write(b"3" * SIZE, SIZE)
    dst = rc.b.mr(64, LOCAL)
    other = PD(rc.b.ctx)
    new_addr = posix_memalign(SIZE)
    try:
        rereg(dst, e.IBV_REREG_MR_CHANGE_TRANSLATION |
              e.IBV_REREG_MR_CHANGE_PD | e.IBV_REREG_MR_CHANGE_ACCESS,
              other, addr=new_addr, length=SIZE, access=REMOTE_WRITE)
        # The QP's PD is rc.b.pd: the MR in `other` refuses the write.
        wc = write(rc, src, dst.rkey, new_addr, SIZE)
        assert wc.status == e.IBV_WC_REM_ACCESS_ERR, status(wc)
        reconnect(rc)
        rereg(dst, e.IBV_REREG_MR_CHANGE_PD, rc.b.pd)
        wc = write(rc, src, dst.rkey, new_addr, SIZE, wr_id=2)
        assert wc.status == e.IBV_WC_SUCCESS, status(wc)
        assert dst.read(SIZE, 0) == b"3" * SIZE
    finally:
        dst.close()
        free(new_addr)


def test_refused_rereg_leaves_mr(rc):
    src = rc.a.mr(64)
    src.write(b"k" * 64, 64)
    dst = rc.b.mr(64, REMOTE_WRITE)
    # Remote write without local write is invalid (ib_check_mr_access).
    with pytest.raises(PyverbsRDMAError) as ex:
        rereg(dst, e.IBV_REREG_MR_CHANGE_ACCESS, rc.b.pd,
              access=e.IBV_ACCESS_REMOTE_WRITE)
    assert ex.value.error_code == errno.EINVAL
    # A translation that cannot be pinned: EFAULT, nothing changed.
    with pytest.raises(PyverbsRDMAError) as ex:
        rereg(dst, e.IBV_REREG_MR_CHANGE_TRANSLATION, rc.b.pd,
              addr=0x1000, length=4096)
    assert ex.value.error_code == errno.EFAULT
    wc = write(rc, src, dst.rkey, dst.buf, 64)
    assert wc.status == e.IBV_WC_SUCCESS, status(wc)
    assert dst.read(64, 0) == b"k" * 64
