# SPDX-License-Identifier: GPL-2.0
"""UD QPs through pyverbs: one end's context, PD, CQ and UD QP
(UDSide), and a connected pair of them with address handles (UDPair).
Used by tests/test_ud.py and tests/test_ud_loss.py."""
import time

import verbs_enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

from rc_verbs import INIT, OPEN_CONTEXTS, RTR, RTS, poll_cq, send_wr

GRH = 40            # bytes of GRH area ahead of every received datagram
QKEY = 0x11111111


class UDSide:
    """Context, PD, CQ and a UD QP on one end's device."""

    def __init__(self, end, qkey=QKEY, max_inline_data=0):
        self.end = end
        self.ctx = Context(name=end.name)
        OPEN_CONTEXTS.append(self.ctx)
        self.port_attr = self.ctx.query_port(1)
        self.mtu = 128 << self.port_attr.active_mtu
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 512, None, None, 0)
        cap = QPCap(max_send_wr=64, max_recv_wr=256, max_send_sge=2,
                    max_recv_sge=2, max_inline_data=max_inline_data)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=self.cq,
                                         rcq=self.cq, cap=cap, sq_sig_all=0))
        self.qkey = qkey
        self.mrs = []

    def mr(self, size):
        mr = MR(self.pd, size, e.IBV_ACCESS_LOCAL_WRITE)
        self.mrs.append(mr)
        return mr

    def to_rts(self, sq_psn=0x123):
        attr = QPAttr(qp_state=INIT)
        attr.pkey_index = 0
        attr.port_num = 1
        attr.qkey = self.qkey
        self.qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                       e.IBV_QP_PORT | e.IBV_QP_QKEY)
        self.qp.modify(QPAttr(qp_state=RTR), e.IBV_QP_STATE)
        attr = QPAttr(qp_state=RTS)
        attr.sq_psn = sq_psn
        self.qp.modify(attr, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)

    def ah_to(self, peer):
        gr = GlobalRoute(dgid=GID(peer.end.gid),
                         sgid_index=self.end.gid_index, hop_limit=64)
        return AH(self.pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))

    def state(self):
        attr, _ = self.qp.query(e.IBV_QP_STATE)
        return attr.qp_state

    def poll(self, n=1, timeout=None):
        """Exactly n WCs within timeout seconds."""
        return poll_cq(self.cq, n, timeout, f"{self.end.name}: ")

    def drain(self, settle=0.5):
        time.sleep(settle)
        wcs = []
        while True:
            got, batch = self.cq.poll(64)
            if not got:
                return wcs
            wcs.extend(batch)


class UDPair:
    def __init__(self, topo, **kw):
        self.a = UDSide(topo.a, **kw)
        self.b = UDSide(topo.b, **kw)
        self.mtu = min(self.a.mtu, self.b.mtu)
        for side in (self.a, self.b):
            side.to_rts()
        self.ah = {self.a: self.a.ah_to(self.b), self.b: self.b.ah_to(self.a)}

    def peer(self, side):
        return self.b if side is self.a else self.a

    def send(self, side, wr_id, sgl, opcode=e.IBV_WR_SEND, imm=0,
             qkey=QKEY, flags=e.IBV_SEND_SIGNALED):
        peer = self.peer(side)
        wr = send_wr(wr_id, opcode, sgl, flags=flags, imm=imm)
        wr.set_wr_ud(self.ah[side], peer.qp.qp_num, qkey)
        side.qp.post_send(wr)
