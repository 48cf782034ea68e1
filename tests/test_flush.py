# SPDX-License-Identifier: GPL-2.0
"""RDMA FLUSH (IBTA 1.5 Memory Placement Extensions; ibv_wr_flush, MRs with
IBV_ACCESS_FLUSH_GLOBAL; srnic_flush_check() in kernel/srnic_resp.c, the
FETH in srnic_wire.c, wr_flush in userspace/qp_ex.cpp), srnic at both ends,
on one device (local delivery) and between two devices in two netns (the
wire: a FLUSH request with its FETH, answered by one empty READ response).

Checked: the device announces global-visibility FLUSH and not persistence;
an MR asking for persistence is refused; data written by RDMA WRITE and then
flushed, of a range and of the whole MR (any length, zero included),
completes IBV_WC_FLUSH and is there; a FLUSH the MR does not grant (a
persistent one, an MR without FLUSH access, a range past the MR, a bad
R_Key) completes IBV_WC_REM_ACCESS_ERR; FLUSH and WRITE keep their order.

Needs rdma-core 45 or later (ibv_wr_flush) and Linux 6.2 or later (the MR
flags): Debian 12 has neither, and skips saying so.
"""
import errno
import os

import pytest

pytest.importorskip("pyverbs")
import harness  # noqa: E402
import verbs_enums as e  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.qp import QPCap, QPEx, QPInitAttrEx  # noqa: E402
from pyverbs.wr import SGE  # noqa: E402

from rc_verbs import (ACCESS_ALL, RCPair, close_all,  # noqa: E402
                      status_name)
from topology import topology  # noqa: E402,F401 (fixture)

CHECK_TOPOLOGIES = ("one-device", "veth-two-netns")

# IBV_DEVICE_FLUSH_GLOBAL and _PERSISTENT of device_cap_flags_ex.
DEVICE_FLUSH_GLOBAL = 1 << 38
DEVICE_FLUSH_PERSISTENT = 1 << 39


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


def flush_pair(topology):
    """Side a posts WRITE and FLUSH through the extended API."""
    for end in (topology.a, topology.b):
        if end.kind != "srnic":
            pytest.skip(f"{end.name} is {end.kind}: srnic's FLUSH")
    if not hasattr(e, "IBV_WR_FLUSH"):
        pytest.skip("this rdma-core has no FLUSH (ibv_wr_flush: 45 on)")
    if harness.KERNEL < (6, 2):
        pytest.skip(f"Linux {os.uname().release} has no FLUSH MR flags")
    p = RCPair(topology)
    a = p.a
    cap = QPCap(max_send_wr=64, max_recv_wr=4, max_send_sge=1,
                max_recv_sge=1)
    attr = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=a.cq, rcq=a.cq, cap=cap,
                        pd=a.pd,
                        send_ops_flags=e.IBV_QP_EX_WITH_FLUSH |
                        e.IBV_QP_EX_WITH_RDMA_WRITE,
                        comp_mask=e.IBV_QP_INIT_ATTR_PD |
                        e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
    a.qp = QPEx(a.ctx, attr)
    p.connect()
    return p


def post_flush(side, wr_id, mr, offset, length, ptype=None, level=None,
               rkey=None):
    qp = side.qp
    qp.wr_start()
    qp.wr_id = wr_id
    qp.wr_flags = e.IBV_SEND_SIGNALED
    qp.wr_flush(mr.rkey if rkey is None else rkey, mr.buf + offset, length,
                e.IBV_FLUSH_GLOBAL if ptype is None else ptype,
                e.IBV_FLUSH_RANGE if level is None else level)
    qp.wr_complete()


def post_write(side, wr_id, src, dst, offset, length):
    qp = side.qp
    qp.wr_start()
    qp.wr_id = wr_id
    qp.wr_flags = e.IBV_SEND_SIGNALED
    qp.wr_rdma_write(dst.rkey, dst.buf + offset)
    qp.wr_set_sge(SGE(src.buf, length, src.lkey))
    qp.wr_complete()


def flush_access():
    return ACCESS_ALL | e.IBV_ACCESS_FLUSH_GLOBAL


def test_device_announces_global_flush(topology):
    p = flush_pair(topology)
    for side in p.sides():
        flags = side.ctx.query_device_ex().device_cap_flags_ex
        assert flags & DEVICE_FLUSH_GLOBAL, hex(flags)
        assert not flags & DEVICE_FLUSH_PERSISTENT, hex(flags)
    with pytest.raises(PyverbsRDMAError) as ex:
        MR(p.b.pd, 4096, ACCESS_ALL | e.IBV_ACCESS_FLUSH_PERSISTENT)
    assert ex.value.error_code in (errno.EOPNOTSUPP, errno.EINVAL)


def test_write_then_flush(topology):
    """WRITEs then FLUSHes of their range and of the whole MR, lengths 0 to
    beyond the MR for the latter; every FLUSH completes IBV_WC_FLUSH in
    order after its WRITE, and the data is there."""
    p = flush_pair(topology)
    a, b = p.a, p.b
    dst = b.mr(1 << 16, flush_access())
    src = a.mr(1 << 16)
    wr = 0
    for i, (length, level, flen) in enumerate(
            [(4096, e.IBV_FLUSH_RANGE, 4096), (100, e.IBV_FLUSH_RANGE, 0),
             (8192, e.IBV_FLUSH_MR, 0), (65536, e.IBV_FLUSH_MR, 12345678)]):
        data = bytes((i * 37 + j) & 0xff for j in range(length))
        src.write(data, length)
        post_write(a, wr, src, dst, 0, length)
        post_flush(a, wr + 1, dst, 0, flen, level=level)
        w, f = a.poll(2)
        assert (w.wr_id, w.status, w.opcode) == \
            (wr, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE)
        assert (f.wr_id, f.status, f.opcode) == \
            (wr + 1, e.IBV_WC_SUCCESS, e.IBV_WC_FLUSH), status_name(f.status)
        assert dst.read(length, 0) == data
        wr += 2


@pytest.mark.parametrize("case", ["persistent", "no_flush_access",
                                  "past_mr", "bad_rkey"])
def test_flush_refused(topology, case):
    """A FLUSH the MR does not grant is a remote access error."""
    p = flush_pair(topology)
    a, b = p.a, p.b
    access = ACCESS_ALL if case == "no_flush_access" else flush_access()
    dst = b.mr(8192, access)
    kw = {}
    if case == "persistent":
        kw["ptype"] = e.IBV_FLUSH_PERSISTENT
    elif case == "bad_rkey":
        kw["rkey"] = dst.rkey ^ 0x5500
    length = 8192 + (4096 if case == "past_mr" else 0)
    post_flush(a, 7, dst, 0, length, **kw)
    (wc,) = a.poll(1)
    assert (wc.wr_id, wc.status) == (7, e.IBV_WC_REM_ACCESS_ERR), \
        status_name(wc.status)
