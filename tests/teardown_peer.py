# SPDX-License-Identifier: GPL-2.0
"""One end of an RC connection that streams RDMA WRITEs, for
tests/test_teardown.py. Run as a process of its own:

    python3 teardown_peer.py DEVICE SGID_INDEX

It opens DEVICE, creates a PD, a CQ, an RC QP and a 1 MiB MR (in memory it
mmap()ed itself, so it can check the memory after deregistration) and
prints one JSON line: {"qpn", "addr", "rkey", "pid"}. It then reads one
JSON line with the peer's {"qpn", "gid", "addr", "rkey"}, connects
(posting the receives in INIT), prints "connected", waits for "go" on
stdin, prints "running" and keeps WINDOW signaled 64 KiB WRITEs in flight to the peer's
MR, printing "progress N" now and then.

It stops on the first error completion (then waits, bounded, for the
flush completions of everything still posted), on IBV_EVENT_DEVICE_FATAL,
or on a command on stdin:

  dereg     stop posting, let its own WRITEs complete, deregister its MR
            (the peer's WRITE target), fill the memory with a pattern and
            wait; the summary says whether the pattern survived (nothing
            wrote to the memory after dereg)
  destroy ORDER
            destroy QP, CQ, MR, PD in ORDER (comma-separated) at once,
            with WRITEs in flight, timing each destroy
  stop      stop posting, drain, close

and prints a last JSON line, the summary (after waiting up to
FATAL_GRACE_SECONDS for IBV_EVENT_DEVICE_FATAL, which a device removal
sends only after destroying the objects), then exits 0.
"""
import ctypes
import json
import mmap
import os
import select
import sys
import time

import verbs_enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

WINDOW = 16
RECVS = 32
MSG = 64 << 10
MR_SIZE = 1 << 20
# The local ACK timeout exponent of the QPs (4.096 us * 2^ACK_TIMEOUT,
# srnic doubles it on each of the 3 retries, so a vanished peer is an error
# completion after 15 timeouts: 1 s at the default 14). A slower kernel
# (scripts/debug-kernel.sh: KASAN under TCG) sets SRNIC_TEST_ACK_TIMEOUT
# higher; the waits here and in tests/test_teardown.py scale with it.
ACK_TIMEOUT = int(os.environ.get("SRNIC_TEST_ACK_TIMEOUT", "14"))
TIME_SCALE = 2 ** max(0, ACK_TIMEOUT - 14)
DRAIN_SECONDS = 20 * TIME_SCALE
FATAL_GRACE_SECONDS = 1.0
ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ)


def out(obj):
    sys.stdout.write((obj if isinstance(obj, str) else json.dumps(obj)) +
                     "\n")
    sys.stdout.flush()


def anon_fds():
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return fds


class Peer:
    def __init__(self, name, sgid_index):
        before = anon_fds()
        self.ctx = Context(name=name)
        # The async event file is the one new [infinibandevent] fd.
        new = [fd for fd, link in anon_fds().items()
               if "infinibandevent" in link and before.get(fd) != link]
        self.async_fd = new[0] if new else None
        self.sgid_index = sgid_index
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 2 * (WINDOW + RECVS), None, None, 0)
        cap = QPCap(max_send_wr=WINDOW, max_recv_wr=RECVS, max_send_sge=1,
                    max_recv_sge=1)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq,
                                         rcq=self.cq, cap=cap))
        self.buf = mmap.mmap(-1, MR_SIZE)
        self.buf[:] = b"\x5a" * MR_SIZE
        self.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        self.mr = MR(self.pd, MR_SIZE, ACCESS, address=self.addr)
        self.statuses = {}
        self.outstanding = 0
        self.recvs = 0
        self.writes_ok = 0
        self.fatal = False
        self.post_error = None
        self.dereg_at = None
        self.passive = False
        self.destroy_times = None

    def connect(self, peer):
        a = QPAttr(qp_state=e.IBV_QPS_INIT)
        a.pkey_index, a.port_num, a.qp_access_flags = 0, 1, ACCESS
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                       e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
        # Receives nobody consumes: they must come back flushed.
        for i in range(RECVS):
            self.qp.post_recv(RecvWR(wr_id=1000 + i, num_sge=1,
                                     sg=[SGE(self.addr, 64, self.mr.lkey)]))
            self.recvs += 1
        a = QPAttr(qp_state=e.IBV_QPS_RTR)
        gr = GlobalRoute(dgid=GID(peer["gid"]), sgid_index=self.sgid_index,
                         hop_limit=64)
        a.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
        a.path_mtu = e.IBV_MTU_1024
        a.dest_qp_num = peer["qpn"]
        a.rq_psn = 0
        a.max_dest_rd_atomic = 4
        a.min_rnr_timer = 1
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
                       e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
                       e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
        a = QPAttr(qp_state=e.IBV_QPS_RTS)
        # 4.096 us * 2^14 = 67 ms by default, 3 retries: a vanished peer is
        # an error completion within about a second (srnic doubles each
        # timeout); see ACK_TIMEOUT.
        a.timeout, a.retry_cnt, a.rnr_retry = ACK_TIMEOUT, 3, 7
        a.sq_psn, a.max_rd_atomic = 0, 4
        self.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT |
                       e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
                       e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)
        self.peer = peer

    def post_write(self, i):
        off = (i * MSG) % MR_SIZE
        wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(self.addr + off, MSG, self.mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(self.peer["rkey"], self.peer["addr"] + off)
        self.qp.post_send(wr)
        self.outstanding += 1

    def check_async(self):
        if self.async_fd is None:
            return
        while select.select([self.async_fd], [], [], 0)[0]:
            ev = self.ctx.get_async_event()
            kind = ev.event_type
            ev.ack()
            if kind == e.IBV_EVENT_DEVICE_FATAL:
                self.fatal = True
                return

    def poll(self):
        got, wcs = self.cq.poll(16)
        first_error = None
        for wc in wcs[:got]:
            self.statuses[wc.status] = self.statuses.get(wc.status, 0) + 1
            if wc.opcode & e.IBV_WC_RECV:
                self.recvs -= 1
            else:
                self.outstanding -= 1
                if wc.status == e.IBV_WC_SUCCESS:
                    self.writes_ok += 1
            if wc.status != e.IBV_WC_SUCCESS and first_error is None:
                first_error = wc.status
        return got, first_error

    def command(self):
        if not select.select([sys.stdin], [], [], 0)[0]:
            return None
        return sys.stdin.readline().split()

    def dereg(self):
        self.passive = True
        deadline = time.monotonic() + DRAIN_SECONDS
        while self.outstanding and time.monotonic() < deadline:
            self.poll()
        t0 = time.monotonic()
        self.mr.close()
        self.dereg_at = time.monotonic() - t0
        self.buf[:] = b"\xc3" * MR_SIZE

    def destroy(self, order):
        objs = {"qp": self.qp, "cq": self.cq, "mr": self.mr, "pd": self.pd}
        self.destroy_times = {}
        for name in order:
            t0 = time.monotonic()
            objs[name].close()
            self.destroy_times[name] = round(time.monotonic() - t0, 3)

    def run(self):
        i = 0
        event = "stopped"
        first_error = None
        t_error = None
        t_start = time.monotonic()
        n = 0
        while True:
            n += 1
            if n % 64 == 0:
                self.check_async()
                if self.fatal:
                    event = "fatal"
                    break
                cmd = self.command()
                if cmd == ["dereg"]:
                    self.dereg()
                    out("dereg done")
                elif cmd and cmd[0] == "destroy":
                    self.destroy(cmd[1].split(","))
                    event = "destroyed"
                    break
                elif cmd is not None:     # "stop", or stdin closed
                    break
            try:
                while self.outstanding < WINDOW and not self.passive:
                    self.post_write(i)
                    i += 1
                    if i % 32 == 0:
                        out(f"progress {self.writes_ok}")
            except (PyverbsError, PyverbsRDMAError) as ex:
                self.post_error = str(ex)
                event = "post_error"
                break
            _, err = self.poll()
            if err is not None:
                first_error, event = err, "error"
                t_error = time.monotonic() - t_start
                break
        if event in ("error", "stopped", "post_error"):
            # Everything still posted completes (flushed once in error).
            deadline = time.monotonic() + DRAIN_SECONDS
            while (self.outstanding or (event == "error" and self.recvs)) \
                    and time.monotonic() < deadline and not self.fatal:
                got, _ = self.poll()
                self.check_async()
                if not got:
                    time.sleep(0.001)
        # While a device goes away, objects are destroyed (and may complete
        # WQEs with errors) before the async file gets DEVICE_FATAL.
        deadline = time.monotonic() + FATAL_GRACE_SECONDS
        while self.async_fd is not None and not self.fatal and \
                time.monotonic() < deadline:
            if select.select([self.async_fd], [], [], 0.1)[0]:
                self.check_async()
        intact = None
        if self.dereg_at is not None:
            time.sleep(0.5)
            intact = self.buf[:] == b"\xc3" * MR_SIZE
        out({"event": event, "first_error": first_error,
             "t_error": t_error, "writes_ok": self.writes_ok,
             "statuses": {str(k): v for k, v in self.statuses.items()},
             "outstanding": self.outstanding, "recvs": self.recvs,
             "fatal": self.fatal, "post_error": self.post_error,
             "dereg_seconds": self.dereg_at, "mr_intact": intact,
             "destroy_times": self.destroy_times})


def main():
    peer = Peer(sys.argv[1], int(sys.argv[2]))
    out({"qpn": peer.qp.qp_num, "addr": peer.addr, "rkey": peer.mr.rkey,
         "pid": os.getpid()})
    peer.connect(json.loads(sys.stdin.readline()))
    # Both ends in RTS before either sends: a WRITE to a peer still in
    # RESET would be dropped, and retried into an error.
    out("connected")
    if sys.stdin.readline().strip() != "go":
        return
    out("running")
    peer.run()


if __name__ == "__main__":
    main()
