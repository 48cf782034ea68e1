# SPDX-License-Identifier: GPL-2.0
"""UD QPs through pyverbs over every topology (tests/topology.py), and
ibv_ud_pingpong between the two ends.

SEND and SEND with immediate from 1 byte to the path MTU, both ways: the
payload after the 40-byte GRH area compared byte for byte, the GRH area
holding the sender's IPv4 header (RoCE v2 over IPv4: 20 zero bytes, then
the IPv4 header, as rxe and mlx5 write it), src_qp, IBV_WC_GRH and the
immediate in the completion. Drops (wrong Q_Key, no receive WQE) leave no
completion and count on the receiving srnic device; a message above the MTU
fails with IBV_WC_LOC_LEN_ERR at the sender, a receive buffer too small
with IBV_WC_LOC_LEN_ERR at the receiver. modify_qp and post errnos.

Run against rxe to validate the suite: SRNIC_TEST_DEVICE_KIND=rxe (the
srnic-specific checks skip there).
"""
import dataclasses
import errno
import ipaddress
import itertools
import random
import struct

import pytest

pytest.importorskip("pyverbs")
import verbs_enums as e  # noqa: E402
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
from pyverbs.qp import QPAttr  # noqa: E402

import harness  # noqa: E402
from perftools import run_pair  # noqa: E402
from rc_verbs import (ERR, INIT, RESET, RTR, RTS,  # noqa: E402
                      close_all, recv_wr, send_wr, sge,
                      status_name)
from topology import link_local_end  # noqa: E402
from topology import topology  # noqa: E402,F401 (fixture)
from ud_verbs import GRH, QKEY, UDPair, UDSide  # noqa: E402

rng = random.Random(0x0d)
ports = itertools.count(18900)


@pytest.fixture(autouse=True)
def close_contexts():
    yield
    close_all()


@pytest.fixture
def ud(topology):
    return UDPair(topology)


def check_grh(grh, src, dst):
    """The GRH area of a RoCE v2 IPv4 datagram from src to dst."""
    assert grh[:20] == bytes(20), grh.hex()
    ver_ihl, _, tot_len, _, _, _, proto, _, saddr, daddr = struct.unpack(
        "!BBHHHBBH4s4s", grh[20:])
    assert ver_ihl == 0x45, grh.hex()
    assert proto == 17, grh.hex()
    assert ipaddress.IPv4Address(saddr) == ipaddress.IPv4Address(src)
    assert ipaddress.IPv4Address(daddr) == ipaddress.IPv4Address(dst)
    return tot_len


def check_grh6(grh, src_gid, dst_gid):
    """The GRH area of a RoCE v2 IPv6 datagram: the IPv6 header."""
    assert grh[0] >> 4 == 6, grh.hex()
    assert grh[6] == 17, grh.hex()
    assert ipaddress.IPv6Address(grh[8:24]) == ipaddress.IPv6Address(src_gid)
    assert ipaddress.IPv6Address(grh[24:40]) == ipaddress.IPv6Address(dst_gid)
    return struct.unpack("!H", grh[4:6])[0] + 40


def one_way(ud, tx, size, imm, wr_id=1):
    rx = ud.peer(tx)
    data = rng.randbytes(size)
    src, dst = tx.mr(max(size, 1)), rx.mr(GRH + size + 16)
    src.write(data, size)
    dst.write(b"\xee" * (GRH + size + 16), GRH + size + 16)
    rx.qp.post_recv(recv_wr(wr_id + 100, [sge(dst)]))
    opcode = e.IBV_WR_SEND_WITH_IMM if imm else e.IBV_WR_SEND
    ud.send(tx, wr_id, [sge(src, 0, size)], opcode=opcode,
            imm=0x12345678 if imm else 0)
    wc = tx.poll()[0]
    assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
    assert (wc.wr_id, wc.opcode) == (wr_id, e.IBV_WC_SEND)
    wc = rx.poll()[0]
    assert wc.status == e.IBV_WC_SUCCESS, status_name(wc.status)
    assert (wc.wr_id, wc.opcode) == (wr_id + 100, e.IBV_WC_RECV)
    assert wc.byte_len == GRH + size
    assert wc.qp_num == rx.qp.qp_num
    assert wc.src_qp == tx.qp.qp_num
    assert wc.wc_flags & e.IBV_WC_GRH
    if imm:
        assert wc.wc_flags & e.IBV_WC_WITH_IMM
        assert wc.imm_data == 0x12345678
    else:
        assert not wc.wc_flags & e.IBV_WC_WITH_IMM
    buf = dst.read(GRH + size + 16, 0)
    if tx.end.gid.startswith("fe80"):
        # The IPv6 header is 20 bytes longer than the IPv4 one.
        tot_len = check_grh6(buf[:GRH], tx.end.gid, rx.end.gid) - 20
    else:
        tot_len = check_grh(buf[:GRH], tx.end.addr, rx.end.addr)
    # IPv4 + UDP + BTH + DETH [+ ImmDt] + payload + pad + ICRC
    assert tot_len == 20 + 8 + 12 + 8 + (4 if imm else 0) + \
        size + (-size % 4) + 4
    assert buf[GRH:GRH + size] == data
    assert buf[GRH + size:] == b"\xee" * 16, "written past the message"


# ---- data ------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 63, 500, "mtu"])
@pytest.mark.parametrize("imm", [False, True], ids=["send", "send_imm"])
def test_send(ud, size, imm):
    size = ud.mtu if size == "mtu" else size
    one_way(ud, ud.a, size, imm, wr_id=1)
    one_way(ud, ud.b, size, imm, wr_id=2)


@pytest.mark.parametrize("imm", [False, True], ids=["send", "send_imm"])
def test_send_ipv6(topology, imm):
    """RoCE v2 over IPv6 (link-local GIDs): the GRH area is the IPv6
    header."""
    a = link_local_end(topology.a)
    b = a if topology.same_device else link_local_end(topology.b)
    ud = UDPair(dataclasses.replace(topology, a=a, b=b))
    one_way(ud, ud.a, 300, imm, wr_id=1)
    one_way(ud, ud.b, 300, imm, wr_id=2)


def test_inline(topology):
    ud = UDPair(topology, max_inline_data=64)
    a, b = ud.a, ud.b
    data = rng.randbytes(48)
    src, dst = a.mr(48), b.mr(GRH + 48)
    src.write(data, 48)
    b.qp.post_recv(recv_wr(9, [sge(dst)]))
    ud.send(a, 8, [sge(src)], flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE)
    src.write(bytes(48), 48)    # inline: the WQE holds the data already
    assert a.poll()[0].status == e.IBV_WC_SUCCESS
    wc = b.poll()[0]
    assert wc.status == e.IBV_WC_SUCCESS and wc.byte_len == GRH + 48
    assert dst.read(48, GRH) == data


def test_scatter_grh_and_payload(ud):
    """The GRH area and the payload may spread over several SGEs."""
    a, b = ud.a, ud.b
    data = rng.randbytes(300)
    src = a.mr(300)
    src.write(data, 300)
    head, tail = b.mr(GRH + 10), b.mr(400)
    b.qp.post_recv(recv_wr(5, [sge(head), sge(tail)]))
    ud.send(a, 4, [sge(src, 0, 100), sge(src, 100, 200)])
    assert a.poll()[0].status == e.IBV_WC_SUCCESS
    wc = b.poll()[0]
    assert wc.status == e.IBV_WC_SUCCESS and wc.byte_len == GRH + 300
    check_grh(head.read(GRH, 0), a.end.addr, b.end.addr)
    assert head.read(10, GRH) + tail.read(290, 0) == data


def test_stream_both_ways(ud):
    """Many datagrams each way, interleaved; all arrive intact, in order
    (nothing on these paths drops or reorders at this rate)."""
    a, b = ud.a, ud.b
    n, size = 100, 200
    bufs = {}
    for side in (a, b):
        rx = side.mr(n * (GRH + size))
        for i in range(n):
            side.qp.post_recv(recv_wr(i, [sge(rx, i * (GRH + size),
                                              GRH + size)]))
        tx = side.mr(n * size)
        data = rng.randbytes(n * size)
        tx.write(data, n * size)
        bufs[side] = (rx, tx, data)
    wcs = {a: [], b: []}

    def sends_done(side):
        return sum(w.opcode == e.IBV_WC_SEND for w in wcs[side])

    # Batches of 8 (the last signaled) keep within the SQ's 64 slots.
    for i in range(n):
        for side in (a, b):
            ud.send(side, i, [sge(bufs[side][1], i * size, size)],
                    flags=e.IBV_SEND_SIGNALED if i % 8 == 7 else 0)
        if i % 8 == 7:
            for side in (a, b):
                while sends_done(side) < (i + 1) // 8:
                    wcs[side].extend(side.poll(1))
    for side in (a, b):
        while len(wcs[side]) < n + n // 8:
            wcs[side].extend(side.poll(1))
        recvs = [w for w in wcs[side] if w.opcode == e.IBV_WC_RECV]
        assert all(w.status == e.IBV_WC_SUCCESS for w in wcs[side]), \
            [status_name(w.status) for w in wcs[side]]
        assert [w.wr_id for w in recvs] == list(range(n))
        rx = bufs[side][0]
        sent = bufs[ud.peer(side)][2]
        for i in range(n):
            assert rx.read(size, i * (GRH + size) + GRH) == \
                sent[i * size:(i + 1) * size], f"datagram {i}"


# ---- drops and errors --------------------------------------------------------

def srnic_only(end, what):
    if end.kind != "srnic":
        pytest.skip(f"{what}: srnic's behaviour ({end.name} is {end.kind})")


def test_qkey_mismatch_dropped(ud):
    a, b = ud.a, ud.b
    srnic_only(b.end, "drop counter")
    src, dst = a.mr(64), b.mr(GRH + 64)
    src.write(b"q" * 64, 64)
    b.qp.post_recv(recv_wr(1, [sge(dst)]))
    before = harness.link_counters(b.end)["rx_drop_bad_qkey"]
    ud.send(a, 1, [sge(src)], qkey=QKEY + 1)
    assert a.poll()[0].status == e.IBV_WC_SUCCESS  # UD: no ACK, no error
    harness.wait_for(lambda: harness.link_counters(b.end)["rx_drop_bad_qkey"] > before,
                     what="rx_drop_bad_qkey to grow")
    assert b.drain() == [], "a datagram with the wrong Q_Key completed"
    # The receive WQE is still there for the right Q_Key.
    ud.send(a, 2, [sge(src)])
    assert a.poll()[0].status == e.IBV_WC_SUCCESS
    wc = b.poll()[0]
    assert wc.status == e.IBV_WC_SUCCESS and wc.wr_id == 1


def test_qkey_high_bit_means_qp_qkey(ud):
    """IBTA: a send WR's Q_Key with bit 31 set stands for the QP's own."""
    a, b = ud.a, ud.b
    srnic_only(a.end, "the sender's Q_Key rule (rxe sends the WR's)")
    src, dst = a.mr(8), b.mr(GRH + 8)
    b.qp.post_recv(recv_wr(3, [sge(dst)]))
    ud.send(a, 3, [sge(src)], qkey=0x80000000)
    assert a.poll()[0].status == e.IBV_WC_SUCCESS
    wc = b.poll()[0]
    assert wc.status == e.IBV_WC_SUCCESS and wc.src_qp == a.qp.qp_num


def test_no_recv_wqe_dropped(ud):
    a, b = ud.a, ud.b
    srnic_only(b.end, "drop counter")
    src, dst = a.mr(32), b.mr(GRH + 32)
    before = harness.link_counters(b.end)["rx_drop_no_recv_wqe"]
    ud.send(a, 1, [sge(src)])
    assert a.poll()[0].status == e.IBV_WC_SUCCESS
    harness.wait_for(lambda: harness.link_counters(b.end)["rx_drop_no_recv_wqe"] > before,
                     what="rx_drop_no_recv_wqe to grow")
    b.qp.post_recv(recv_wr(2, [sge(dst)]))
    assert b.drain() == [], "a dropped datagram completed later"
    ud.send(a, 3, [sge(src)])
    assert a.poll()[0].status == e.IBV_WC_SUCCESS
    wc = b.poll()[0]
    assert wc.status == e.IBV_WC_SUCCESS and wc.wr_id == 2
    assert b.state() == RTS


def test_send_above_mtu_fails(ud):
    a, b = ud.a, ud.b
    srnic_only(a.end, "LOC_LEN_ERR above the MTU (rxe fakes a success)")
    size = a.mtu + 1
    src, dst = a.mr(size), b.mr(GRH + size)
    b.qp.post_recv(recv_wr(1, [sge(dst)]))
    ud.send(a, 1, [sge(src)])
    wc = a.poll()[0]
    assert wc.status == e.IBV_WC_LOC_LEN_ERR, status_name(wc.status)
    assert b.drain() == [], "an oversized datagram arrived"
    assert a.state() == ERR


def test_ah_of_another_pd_refused(ud):
    """AH numbers are per device: a WQE naming an AH of another PD fails
    (IBV_WC_LOC_QP_OP_ERR) and sends nothing."""
    a, b = ud.a, ud.b
    srnic_only(a.end, "the AH's PD check")
    other_pd = PD(a.ctx)
    gr = GlobalRoute(dgid=GID(b.end.gid), sgid_index=a.end.gid_index,
                     hop_limit=64)
    foreign = AH(other_pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))
    src, dst = a.mr(16), b.mr(GRH + 16)
    b.qp.post_recv(recv_wr(1, [sge(dst)]))
    wr = send_wr(1, e.IBV_WR_SEND, [sge(src)])
    wr.set_wr_ud(foreign, b.qp.qp_num, QKEY)
    a.qp.post_send(wr)
    wc = a.poll()[0]
    assert wc.status == e.IBV_WC_LOC_QP_OP_ERR, status_name(wc.status)
    assert b.drain() == [], "a datagram went out"
    assert a.state() == ERR


def test_recv_buffer_too_small(ud):
    a, b = ud.a, ud.b
    srnic_only(b.end, "LOC_LEN_ERR completion (rxe drops silently)")
    src, small, big = a.mr(100), b.mr(GRH + 99), b.mr(GRH + 100)
    src.write(rng.randbytes(100), 100)
    b.qp.post_recv(recv_wr(1, [sge(small)]))
    b.qp.post_recv(recv_wr(2, [sge(big)]))
    ud.send(a, 1, [sge(src)])
    ud.send(a, 2, [sge(src)])
    assert [w.status for w in a.poll(2)] == [e.IBV_WC_SUCCESS] * 2
    wcs = b.poll(2)
    assert [(w.wr_id, w.status) for w in wcs] == [
        (1, e.IBV_WC_LOC_LEN_ERR), (2, e.IBV_WC_SUCCESS)], \
        [(w.wr_id, status_name(w.status)) for w in wcs]
    assert b.state() == RTS, "a short buffer fails one datagram, not the QP"
    assert big.read(100, GRH) == src.read(100, 0)


# ---- control path --------------------------------------------------------------

def expect_errno(code, fn, *args):
    with pytest.raises(PyverbsRDMAError) as ex:
        fn(*args)
    assert ex.value.error_code == code, ex.value


def test_modify_qp(topology):
    side = UDSide(topology.a)
    qp = side.qp
    # INIT needs the Q_Key, port and P_Key index.
    attr = QPAttr(qp_state=INIT)
    attr.pkey_index, attr.port_num, attr.qkey = 0, 1, 0x4242
    expect_errno(errno.EINVAL, qp.modify, attr, e.IBV_QP_STATE |
                 e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT)
    # An RC attribute is no UD one.
    attr.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
    expect_errno(errno.EINVAL, qp.modify, attr, e.IBV_QP_STATE |
                 e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY |
                 e.IBV_QP_ACCESS_FLAGS)
    qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
              e.IBV_QP_QKEY)
    got, _ = qp.query(e.IBV_QP_QKEY | e.IBV_QP_STATE)
    assert (got.qp_state, got.qkey) == (INIT, 0x4242)
    # RTR takes no path: an address vector is refused.
    rtr = QPAttr(qp_state=RTR)
    rtr.path_mtu = e.IBV_MTU_1024
    expect_errno(errno.EINVAL, qp.modify, rtr,
                 e.IBV_QP_STATE | e.IBV_QP_PATH_MTU)
    qp.modify(QPAttr(qp_state=RTR), e.IBV_QP_STATE)
    # RTS needs the SQ PSN.
    rts = QPAttr(qp_state=RTS)
    rts.sq_psn = 0x45
    expect_errno(errno.EINVAL, qp.modify, rts, e.IBV_QP_STATE)
    qp.modify(rts, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    got, init = qp.query(e.IBV_QP_SQ_PSN | e.IBV_QP_STATE)
    assert (got.qp_state, got.sq_psn) == (RTS, 0x45)
    assert init.qp_type == e.IBV_QPT_UD
    # The Q_Key may change in RTS.
    rts = QPAttr()
    rts.qkey = 0x777
    qp.modify(rts, e.IBV_QP_QKEY)
    got, _ = qp.query(e.IBV_QP_QKEY)
    assert got.qkey == 0x777
    qp.modify(QPAttr(qp_state=RESET), e.IBV_QP_STATE)
    assert side.state() == RESET


def test_post_errnos(topology):
    ud = UDPair(topology)
    a = ud.a
    src = a.mr(64)
    # Only SEND and SEND with immediate exist on UD (rxe's provider takes
    # the others, and fails them later).
    for opcode in (e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_READ,
                   e.IBV_WR_ATOMIC_FETCH_AND_ADD):
        if a.end.kind != "srnic":
            break
        wr = send_wr(1, opcode, [sge(src)])
        wr.set_wr_ud(ud.ah[a], ud.b.qp.qp_num, QKEY)
        expect_errno(errno.EINVAL, a.qp.post_send, wr)
    # Not in RTS: nothing is sent.
    a.qp.modify(QPAttr(qp_state=RESET), e.IBV_QP_STATE)
    wr = send_wr(1, e.IBV_WR_SEND, [sge(src)])
    wr.set_wr_ud(ud.ah[a], ud.b.qp.qp_num, QKEY)
    expect_errno(errno.EINVAL, a.qp.post_send, wr)
    assert a.drain(0.1) == []


def test_error_state_flushes(ud):
    b = ud.b
    dst = b.mr(GRH + 8)
    b.qp.post_recv(recv_wr(1, [sge(dst)]))
    b.qp.modify(QPAttr(qp_state=ERR), e.IBV_QP_STATE)
    wc = b.poll()[0]
    assert (wc.wr_id, wc.status) == (1, e.IBV_WC_WR_FLUSH_ERR)


# ---- ibv_ud_pingpong -----------------------------------------------------------

@pytest.mark.parametrize("events", [False, True], ids=["poll", "events"])
@pytest.mark.parametrize("size", [1, 1024])
def test_ud_pingpong(topology, size, events, tmp_path):
    port = next(ports)
    iters = 200

    def argv(end):
        return (["ibv_ud_pingpong", "-d", end.name, "-g", str(end.gid_index),
                 "-s", str(size), "-n", str(iters), "-r", "64", "-p",
                 str(port), "-c"] + (["-e"] if events else []))

    out, _ = run_pair(topology, argv(topology.a), argv(topology.b), port,
                      tmp_path, f"ud-pingpong-{size}")
    assert f"{iters} iters" in out, out
