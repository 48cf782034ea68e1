# SPDX-License-Identifier: GPL-2.0
"""The posting end of an RC connection on one srnic device, for
tests/test_direct_path.py, run as a process of its own (under another user
id, to check who may have a direct window):

    python3 direct_path_peer.py DEVICE SGID_INDEX [write|send]

It opens DEVICE, creates a PD, a CQ, an RC QP and a 4 KiB MR filled with
bytes 0, 1, 2, ... and prints one JSON line {"qpn"}. It then reads one
JSON line with the peer's {"qpn", "addr", "rkey"}, connects, posts one
signaled 64-byte RDMA WRITE of its buffer to the peer's addr (or, with
send, one 64-byte SEND, for tests/test_direct_send.py), and prints a last
JSON line {"status", "opcode"} of its completion.

post_as_nobody() runs it so, as uid 65534, from a test.
"""
import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import verbs_enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

LENGTH = 64


def main():
    dev, gidx = sys.argv[1], int(sys.argv[2])
    send = len(sys.argv) > 3 and sys.argv[3] == "send"
    ctx = Context(name=dev)
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    mr.write(bytes(range(256)) * 16, 4096)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap),
            QPAttr(port_num=1))
    print(json.dumps({"qpn": qp.qp_num}), flush=True)

    peer = json.loads(sys.stdin.readline())
    attr = QPAttr(port_num=1)
    attr.path_mtu = e.IBV_MTU_1024
    attr.max_dest_rd_atomic = 1
    attr.max_rd_atomic = 1
    attr.min_rnr_timer = 1
    attr.timeout = 14
    attr.retry_cnt = 7
    attr.rnr_retry = 7
    gr = GlobalRoute(dgid=ctx.query_gid(1, gidx), sgid_index=gidx)
    attr.ah_attr = AHAttr(port_num=1, is_global=1, gr=gr)
    attr.dest_qp_num = peer["qpn"]
    attr.rq_psn = 0
    attr.sq_psn = 0
    qp.to_rts(attr)

    w = SendWR(wr_id=1,
               opcode=e.IBV_WR_SEND if send else e.IBV_WR_RDMA_WRITE,
               num_sge=1, sg=[SGE(mr.buf, LENGTH, mr.lkey)],
               send_flags=e.IBV_SEND_SIGNALED)
    if not send:
        w.set_wr_rdma(peer["rkey"], peer["addr"])
    qp.post_send(w)
    deadline = time.monotonic() + 30
    wcs = []
    while not wcs and time.monotonic() < deadline:
        wcs = cq.poll(1)[1]
    result = {"status": wcs[0].status, "opcode": wcs[0].opcode} if wcs \
        else {"status": None}
    print(json.dumps(result), flush=True)
    qp.close()
    mr.close()
    cq.close()
    pd.close()
    ctx.close()


def post_as_nobody(end, dev, mode, counter):
    """This script as uid 65534 (no capabilities) on device dev, connected
    to end (a test_rc_local.RcEnd, not connected yet), posting one mode
    ("write" into end's MR at offset 0, or "send"). Returns its result
    ({"status", "opcode"}) and the value of counter() just before it
    posted."""
    peer = subprocess.Popen(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
         sys.executable, os.path.abspath(__file__), dev, str(end.gidx),
         mode],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        hello = json.loads(peer.stdout.readline())
        end.connect(SimpleNamespace(
            ctx=end.ctx, gidx=end.gidx,
            qp=SimpleNamespace(qp_num=hello["qpn"])))
        before = counter()
        peer.stdin.write(json.dumps({"qpn": end.qp.qp_num,
                                     "addr": end.mr.buf,
                                     "rkey": end.mr.rkey}) + "\n")
        peer.stdin.flush()
        result = json.loads(peer.stdout.readline())
        assert peer.wait(timeout=30) == 0
    finally:
        if peer.poll() is None:
            peer.kill()
            peer.wait()
    return result, before


if __name__ == "__main__":
    main()
