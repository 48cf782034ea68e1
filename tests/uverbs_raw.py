# SPDX-License-Identifier: GPL-2.0
"""uverbs spoken directly, around the provider: the legacy write() commands
of <rdma/ib_user_verbs.h> on /dev/infiniband/uverbsN, srnic's driver data
(kernel/uapi/rdma/srnic-abi.h) appended by hand, and the rings mmap()ed and
driven from Python.

Every command raises OSError with the kernel's errno on failure, so tests
can assert the exact errno a malformed command gets. Layouts are ctypes
transcriptions of the two headers (sizes asserted below against the C
sizeof values); nothing here goes through libibverbs.
"""
import ctypes as C
import errno
import mmap
import os
import re
import select
import struct

# enum ib_uverbs_write_cmds
CMD_GET_CONTEXT = 0
CMD_ALLOC_PD = 3
CMD_DEALLOC_PD = 4
CMD_REG_MR = 9
CMD_DEREG_MR = 13
CMD_CREATE_CQ = 18
CMD_DESTROY_CQ = 20
CMD_CREATE_QP = 24
CMD_QUERY_QP = 25
CMD_MODIFY_QP = 26
CMD_DESTROY_QP = 27
CMD_POST_SEND = 28
CMD_POST_RECV = 29
CMD_CREATE_SRQ = 32
CMD_DESTROY_SRQ = 35
CMD_FLAG_EXTENDED = 0x80000000

# enum ib_qp_state, ib_qp_type, ib_qp_attr_mask, access flags, MTU
RESET, INIT, RTR, RTS, SQD, SQE, ERR = range(7)
QPT_RC, QPT_UC, QPT_UD, QPT_RAW_PACKET = 2, 3, 4, 8
QP_STATE, QP_CUR_STATE = 1 << 0, 1 << 1
QP_ACCESS_FLAGS, QP_PKEY_INDEX, QP_PORT = 1 << 3, 1 << 4, 1 << 5
QP_AV, QP_PATH_MTU, QP_TIMEOUT, QP_RETRY_CNT = 1 << 7, 1 << 8, 1 << 9, 1 << 10
QP_RNR_RETRY, QP_RQ_PSN, QP_MAX_QP_RD_ATOMIC = 1 << 11, 1 << 12, 1 << 13
QP_MIN_RNR_TIMER, QP_SQ_PSN, QP_MAX_DEST_RD_ATOMIC = 1 << 15, 1 << 16, 1 << 17
QP_DEST_QPN = 1 << 20
ACCESS_LOCAL_WRITE, ACCESS_REMOTE_WRITE, ACCESS_REMOTE_READ = 1, 2, 4
ACCESS_ALL = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ
MTU_1024 = 3

# IBV_WR_* opcodes, srnic WQE flags, IBV_WC_* statuses
WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM, WR_SEND, WR_SEND_WITH_IMM, \
    WR_RDMA_READ = range(5)
WQE_SIGNALED, WQE_FENCE, WQE_SOLICITED, WQE_INLINE = 1, 2, 4, 8
WC_SUCCESS, WC_LOC_LEN_ERR, WC_LOC_QP_OP_ERR = 0, 1, 2
WC_LOC_PROT_ERR, WC_WR_FLUSH_ERR = 4, 5
WC_REM_ACCESS_ERR, WC_RETRY_EXC_ERR = 10, 12

# enum ib_event_type
EVENT_CQ_ERR, EVENT_QP_FATAL = 0, 1
EVENT_DEVICE_FATAL = 8

# srnic-abi.h
def _abi_version():
    header = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                          "kernel", "uapi", "rdma", "srnic-abi.h")
    with open(header) as f:
        m = re.search(r"^#define SRNIC_ABI_VERSION (\d+)$", f.read(), re.M)
    assert m, header
    return int(m.group(1))


SRNIC_ABI_VERSION = _abi_version()
QUEUE_NEED_WAKEUP, QUEUE_ERROR = 1, 2
CTRL_PRODUCER, CTRL_CONSUMER, CTRL_FLAGS = 0, 64, 128
CTRL_NOTIFY, CTRL_NOTIFY_SEQ = 132, 136
SEND_WQE_SIZE, RECV_WQE_SIZE, SGE_SIZE, CQE_SIZE = 64, 16, 16, 64

u8, u16, u32, s32, u64 = C.c_uint8, C.c_uint16, C.c_uint32, C.c_int32, \
    C.c_uint64


class S(C.Structure):
    _pack_ = 8
    # The layout _pack_ has always meant; Python 3.14 wants it said (and
    # older ones ignore the attribute). The structs have no bit fields.
    _layout_ = "ms"

    def pack(self):
        return bytes(self)


def _s(name, fields):
    return type(name, (S,), {"_fields_": fields})


CmdHdr = _s("CmdHdr", [("command", u32), ("in_words", u16),
                       ("out_words", u16)])
ExCmdHdr = _s("ExCmdHdr", [("response", u64), ("provider_in_words", u16),
                           ("provider_out_words", u16),
                           ("cmd_hdr_reserved", u32)])
GetContext = _s("GetContext", [("response", u64)])
GetContextResp = _s("GetContextResp", [("async_fd", u32),
                                       ("num_comp_vectors", u32)])
AllocPd = _s("AllocPd", [("response", u64)])
AllocPdResp = _s("AllocPdResp", [("pd_handle", u32)])
DeallocPd = _s("DeallocPd", [("pd_handle", u32)])
RegMr = _s("RegMr", [("response", u64), ("start", u64), ("length", u64),
                     ("hca_va", u64), ("pd_handle", u32),
                     ("access_flags", u32)])
RegMrResp = _s("RegMrResp", [("mr_handle", u32), ("lkey", u32),
                             ("rkey", u32)])
DeregMr = _s("DeregMr", [("mr_handle", u32)])
CreateCq = _s("CreateCq", [("response", u64), ("user_handle", u64),
                           ("cqe", u32), ("comp_vector", u32),
                           ("comp_channel", s32), ("reserved", u32)])
CreateCqResp = _s("CreateCqResp", [("cq_handle", u32), ("cqe", u32)])
DestroyCq = _s("DestroyCq", [("response", u64), ("cq_handle", u32),
                             ("reserved", u32)])
DestroyCqResp = _s("DestroyCqResp", [("comp_events_reported", u32),
                                     ("async_events_reported", u32)])
CreateQp = _s("CreateQp", [
    ("response", u64), ("user_handle", u64), ("pd_handle", u32),
    ("send_cq_handle", u32), ("recv_cq_handle", u32), ("srq_handle", u32),
    ("max_send_wr", u32), ("max_recv_wr", u32), ("max_send_sge", u32),
    ("max_recv_sge", u32), ("max_inline_data", u32), ("sq_sig_all", u8),
    ("qp_type", u8), ("is_srq", u8), ("reserved", u8)])
CreateQpResp = _s("CreateQpResp", [
    ("qp_handle", u32), ("qpn", u32), ("max_send_wr", u32),
    ("max_recv_wr", u32), ("max_send_sge", u32), ("max_recv_sge", u32),
    ("max_inline_data", u32), ("reserved", u32)])
QpDest = _s("QpDest", [
    ("dgid", u8 * 16), ("flow_label", u32), ("dlid", u16), ("reserved", u16),
    ("sgid_index", u8), ("hop_limit", u8), ("traffic_class", u8), ("sl", u8),
    ("src_path_bits", u8), ("static_rate", u8), ("is_global", u8),
    ("port_num", u8)])
_QP_ATTR_TAIL = [
    ("pkey_index", u16), ("alt_pkey_index", u16), ("qp_state", u8),
    ("cur_qp_state", u8), ("path_mtu", u8), ("path_mig_state", u8)]
ModifyQp = _s("ModifyQp", [
    ("dest", QpDest), ("alt_dest", QpDest), ("qp_handle", u32),
    ("attr_mask", u32), ("qkey", u32), ("rq_psn", u32), ("sq_psn", u32),
    ("dest_qp_num", u32), ("qp_access_flags", u32)] + _QP_ATTR_TAIL + [
    ("en_sqd_async_notify", u8), ("max_rd_atomic", u8),
    ("max_dest_rd_atomic", u8), ("min_rnr_timer", u8), ("port_num", u8),
    ("timeout", u8), ("retry_cnt", u8), ("rnr_retry", u8),
    ("alt_port_num", u8), ("alt_timeout", u8), ("reserved", u8 * 2)])
ExModifyQp = _s("ExModifyQp", [("base", ModifyQp), ("rate_limit", u32),
                               ("reserved", u32)])
QueryQp = _s("QueryQp", [("response", u64), ("qp_handle", u32),
                         ("attr_mask", u32)])
QueryQpResp = _s("QueryQpResp", [
    ("dest", QpDest), ("alt_dest", QpDest), ("max_send_wr", u32),
    ("max_recv_wr", u32), ("max_send_sge", u32), ("max_recv_sge", u32),
    ("max_inline_data", u32), ("qkey", u32), ("rq_psn", u32),
    ("sq_psn", u32), ("dest_qp_num", u32), ("qp_access_flags", u32)] +
    _QP_ATTR_TAIL + [
    ("sq_draining", u8), ("max_rd_atomic", u8), ("max_dest_rd_atomic", u8),
    ("min_rnr_timer", u8), ("port_num", u8), ("timeout", u8),
    ("retry_cnt", u8), ("rnr_retry", u8), ("alt_port_num", u8),
    ("alt_timeout", u8), ("sq_sig_all", u8), ("reserved", u8 * 5)])
DestroyQp = _s("DestroyQp", [("response", u64), ("qp_handle", u32),
                             ("reserved", u32)])
DestroyQpResp = _s("DestroyQpResp", [("events_reported", u32)])
PostSend = _s("PostSend", [("response", u64), ("qp_handle", u32),
                           ("wr_count", u32), ("sge_count", u32),
                           ("wqe_size", u32)])
PostSendResp = _s("PostSendResp", [("bad_wr", u32)])
SendWr = _s("SendWr", [("wr_id", u64), ("num_sge", u32), ("opcode", u32),
                       ("send_flags", u32), ("imm_data", u32),
                       ("remote_addr", u64), ("rkey", u32),
                       ("reserved", u32), ("pad", u64 * 2)])
RecvWr = _s("RecvWr", [("wr_id", u64), ("num_sge", u32),
                       ("reserved", u32)])

# srnic-abi.h driver data
SrnicUctxReq = _s("SrnicUctxReq", [("abi_version", u32), ("reserved", u32)])
SrnicUctxResp = _s("SrnicUctxResp", [
    ("abi_version", u32), ("max_inline_data", u32),
    ("queue_ctrl_size", u32), ("page_size", u32)])
SrnicPdResp = _s("SrnicPdResp", [("pdn", u32), ("reserved", u32)])
QueueDesc = _s("QueueDesc", [("mmap_offset", u64), ("mmap_size", u32),
                             ("num_entries", u32), ("entry_size", u32),
                             ("ring_offset", u32), ("flags", u32),
                             ("reserved", u32)])
QUEUE_DESC_SHARED = 1
SrnicCqResp = _s("SrnicCqResp", [("ring", QueueDesc), ("cqn", u32),
                                 ("reserved", u32)])
SrnicQpResp = _s("SrnicQpResp", [("sq", QueueDesc), ("rq", QueueDesc),
                                 ("qpn", u32), ("reserved", u32)])
SrnicSrqResp = _s("SrnicSrqResp", [("rq", QueueDesc), ("srqn", u32),
                                   ("reserved", u32)])
CreateSrq = _s("CreateSrq", [("response", u64), ("user_handle", u64),
                             ("pd_handle", u32), ("max_wr", u32),
                             ("max_sge", u32), ("srq_limit", u32)])
CreateSrqResp = _s("CreateSrqResp", [("srq_handle", u32), ("max_wr", u32),
                                     ("max_sge", u32), ("srqn", u32)])
DestroySrq = _s("DestroySrq", [("response", u64), ("srq_handle", u32),
                               ("reserved", u32)])
DestroySrqResp = _s("DestroySrqResp", [("events_reported", u32)])

# The C sizes (gcc against the installed <rdma/ib_user_verbs.h>).
for _t, _n in ((CmdHdr, 8), (ExCmdHdr, 16), (CreateCq, 32), (RegMr, 40),
               (CreateQp, 56), (CreateQpResp, 32), (QpDest, 32),
               (ModifyQp, 112), (ExModifyQp, 120), (QueryQpResp, 128),
               (SendWr, 56), (RecvWr, 16), (SrnicUctxResp, 16),
               (QueueDesc, 32), (SrnicCqResp, 40), (SrnicQpResp, 72),
               (SrnicSrqResp, 40), (CreateSrq, 32), (CreateSrqResp, 16),
               (DestroySrq, 16)):
    assert C.sizeof(_t) == _n, (_t.__name__, C.sizeof(_t), _n)
assert QueryQpResp.qp_state.offset == 108 and ModifyQp.qp_state.offset == 96

PAGE_SIZE = mmap.PAGESIZE


def uverbs_path(ibdev):
    """/dev/infiniband/uverbsN of the RDMA device named ibdev."""
    base = "/sys/class/infiniband_verbs"
    for name in os.listdir(base):
        try:
            with open(f"{base}/{name}/ibdev") as f:
                if f.read().strip() == ibdev:
                    return f"/dev/infiniband/{name}"
        except OSError:
            continue
    raise FileNotFoundError(f"no uverbs device for {ibdev}")


def ipv4_gid_bytes(addr):
    return bytes(10) + b"\xff\xff" + bytes(int(x) for x in addr.split("."))


class Ring:
    """A ring mmap()ed from the context fd, as struct srnic_queue_desc
    describes it: the whole mapping (a small SQ's is shared with other
    rings), the ring from byte desc.ring_offset."""

    def __init__(self, fd, desc, ctrl_size):
        self.desc = desc
        self.base = desc.ring_offset
        self.num_entries = desc.num_entries
        self.entry_size = desc.entry_size
        self.ctrl_size = ctrl_size
        self.map = mmap.mmap(fd, desc.mmap_size, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE,
                             offset=desc.mmap_offset)

    def get32(self, off):
        """The u32 at off in the control record."""
        return struct.unpack_from("<I", self.map, self.base + off)[0]

    def put32(self, off, value):
        struct.pack_into("<I", self.map, self.base + off, value & 0xffffffff)

    def entry_offset(self, index):
        """Where entry index is in the mapping (self.map)."""
        return self.base + self.ctrl_size + \
            (index & (self.num_entries - 1)) * self.entry_size

    def ring_bytes(self):
        """The ring's bytes: control record and entries."""
        end = self.entry_offset(self.num_entries - 1) + self.entry_size
        return bytes(self.map[self.base:end])

    producer = property(lambda self: self.get32(CTRL_PRODUCER))
    consumer = property(lambda self: self.get32(CTRL_CONSUMER))
    flags = property(lambda self: self.get32(CTRL_FLAGS))

    def close(self):
        self.map.close()


class Cq:
    def __init__(self, ctx, handle, resp, drv):
        self.ctx, self.handle, self.cqe, self.drv = ctx, handle, resp.cqe, drv
        self.ring = None
        self.consumer = 0

    def map(self):
        self.ring = self.ctx.ring(self.drv.ring)
        return self.ring

    def poll(self, max_n=1 << 30):
        """CQEs written since the last poll, as dicts (provider's part of
        the protocol: owner phase, then body, then release consumer)."""
        out = []
        r = self.ring
        while len(out) < max_n:
            off = r.entry_offset(self.consumer)
            lap = self.consumer // r.num_entries
            if r.map[off + 39] != (lap & 1) + 1:
                break
            wr_id, byte_len, _imm, qp_num = struct.unpack_from(
                "<QIII", r.map, off)
            status, opcode = r.map[off + 32], r.map[off + 33]
            out.append({"wr_id": wr_id, "byte_len": byte_len,
                        "qp_num": qp_num, "status": status,
                        "opcode": opcode})
            self.consumer = (self.consumer + 1) & 0xffffffff
            r.put32(CTRL_CONSUMER, self.consumer)
        return out


class Qp:
    def __init__(self, ctx, handle, resp, drv):
        self.ctx, self.handle, self.resp, self.drv = ctx, handle, resp, drv
        self.qpn = resp.qpn
        self.sq = self.rq = None
        self.sq_prod = self.rq_prod = 0

    def map(self):
        self.sq = self.ctx.ring(self.drv.sq)
        self.rq = self.ctx.ring(self.drv.rq)

    def write_send(self, wr_id, opcode, sges=(), flags=WQE_SIGNALED,
                   remote_addr=0, rkey=0):
        """Write one send WQE at the provider's producer index, publish
        it (no doorbell)."""
        off = self.sq.entry_offset(self.sq_prod)
        m = self.sq.map
        m[off:off + self.sq.entry_size] = bytes(self.sq.entry_size)
        struct.pack_into("<QBBHI", m, off, wr_id, opcode, flags, len(sges), 0)
        struct.pack_into("<QI", m, off + 24, remote_addr, rkey)
        for i, (addr, length, lkey) in enumerate(sges):
            struct.pack_into("<QII", m, off + SEND_WQE_SIZE + i * SGE_SIZE,
                             addr, length, lkey)
        self.sq_prod = (self.sq_prod + 1) & 0xffffffff
        self.sq.put32(CTRL_PRODUCER, self.sq_prod)

    def write_recv(self, wr_id, sges=()):
        off = self.rq.entry_offset(self.rq_prod)
        m = self.rq.map
        m[off:off + self.rq.entry_size] = bytes(self.rq.entry_size)
        struct.pack_into("<QHHI", m, off, wr_id, len(sges), 0, 0)
        for i, (addr, length, lkey) in enumerate(sges):
            struct.pack_into("<QII", m, off + RECV_WQE_SIZE + i * SGE_SIZE,
                             addr, length, lkey)
        self.rq_prod = (self.rq_prod + 1) & 0xffffffff
        self.rq.put32(CTRL_PRODUCER, self.rq_prod)

    def doorbell_sq(self):
        self.ctx.post_send(self.handle)

    def doorbell_rq(self):
        self.ctx.post_recv(self.handle)

    def state(self):
        return self.ctx.query_qp(self.handle).qp_state


class Mr:
    def __init__(self, handle, resp, buf, length):
        self.handle, self.lkey, self.rkey = handle, resp.lkey, resp.rkey
        self.buf = buf
        self.addr = C.addressof(buf)
        self.length = length


class RawContext:
    """An open uverbs file. get_context() with srnic's driver data makes it
    a context; every other method is one write() command."""

    def __init__(self, ibdev):
        self.path = uverbs_path(ibdev)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        self.async_fd = None
        self.ctrl_size = PAGE_SIZE
        self.uctx_resp = None
        self.rings = []

    def ring(self, desc):
        """Map a ring; close() unmaps it (a mapping keeps the file, and
        so the context, alive)."""
        r = Ring(self.fd, desc, self.ctrl_size)
        self.rings.append(r)
        return r

    # -- plumbing --------------------------------------------------------

    def write_cmd(self, command, req=b"", resp_len=0, driver_in=b"",
                  driver_out_len=0, in_words=None, out_words=None):
        """One legacy command. req must begin with the response pointer
        (if the command has a response): it is patched in here. Returns
        the response buffer (core response, then driver response)."""
        resp = C.create_string_buffer(max(resp_len + driver_out_len, 8))
        req = bytearray(req)
        if resp_len or driver_out_len:
            struct.pack_into("<Q", req, 0, C.addressof(resp))
        body = bytes(req) + bytes(driver_in)
        total = C.sizeof(CmdHdr) + len(body)
        hdr = CmdHdr(command=command,
                     in_words=total // 4 if in_words is None else in_words,
                     out_words=((resp_len + driver_out_len) // 4
                                if out_words is None else out_words))
        os.write(self.fd, hdr.pack() + body)
        return resp

    def write_ex_cmd(self, command, req, driver_in=b""):
        """One extended command without response."""
        hdr = CmdHdr(command=CMD_FLAG_EXTENDED | command,
                     in_words=len(req) // 8, out_words=0)
        ex = ExCmdHdr(response=0, provider_in_words=len(driver_in) // 8)
        os.write(self.fd, hdr.pack() + ex.pack() + bytes(req) +
                 bytes(driver_in))

    # -- context, PD, MR ---------------------------------------------------

    def get_context(self, driver_in=None, driver_out_len=C.sizeof(SrnicUctxResp)):
        if driver_in is None:
            driver_in = SrnicUctxReq(abi_version=SRNIC_ABI_VERSION).pack()
        buf = self.write_cmd(CMD_GET_CONTEXT, GetContext().pack(),
                             C.sizeof(GetContextResp), driver_in,
                             driver_out_len)
        resp = GetContextResp.from_buffer_copy(buf)
        self.async_fd = resp.async_fd
        if driver_out_len >= C.sizeof(SrnicUctxResp):
            self.uctx_resp = SrnicUctxResp.from_buffer_copy(
                buf, C.sizeof(GetContextResp))
            self.ctrl_size = self.uctx_resp.queue_ctrl_size
        return resp

    def alloc_pd(self, driver_in=b""):
        buf = self.write_cmd(CMD_ALLOC_PD, AllocPd().pack(),
                             C.sizeof(AllocPdResp), driver_in,
                             C.sizeof(SrnicPdResp))
        return AllocPdResp.from_buffer_copy(buf).pd_handle

    def dealloc_pd(self, handle):
        self.write_cmd(CMD_DEALLOC_PD, DeallocPd(pd_handle=handle).pack())

    def reg_mr(self, pd, length, access=ACCESS_ALL, buf=None):
        if buf is None:
            buf = C.create_string_buffer(length)
        addr = C.addressof(buf)
        out = self.write_cmd(CMD_REG_MR, RegMr(start=addr, length=length,
                                               hca_va=addr, pd_handle=pd,
                                               access_flags=access).pack(),
                             C.sizeof(RegMrResp))
        resp = RegMrResp.from_buffer_copy(out)
        return Mr(resp.mr_handle, resp, buf, length)

    def dereg_mr(self, mr):
        handle = mr.handle if isinstance(mr, Mr) else mr
        self.write_cmd(CMD_DEREG_MR, DeregMr(mr_handle=handle).pack())

    # -- CQ -----------------------------------------------------------------

    def create_cq(self, cqe, comp_vector=0, comp_channel=-1,
                  driver_in=bytes(8), driver_out_len=C.sizeof(SrnicCqResp)):
        buf = self.write_cmd(CMD_CREATE_CQ,
                             CreateCq(cqe=cqe, comp_vector=comp_vector,
                                      comp_channel=comp_channel).pack(),
                             C.sizeof(CreateCqResp), driver_in,
                             driver_out_len)
        resp = CreateCqResp.from_buffer_copy(buf)
        drv = SrnicCqResp.from_buffer_copy(
            buf.raw[C.sizeof(CreateCqResp):].ljust(C.sizeof(SrnicCqResp),
                                                  b"\0"))
        return Cq(self, resp.cq_handle, resp, drv)

    def destroy_cq(self, cq):
        handle = cq.handle if isinstance(cq, Cq) else cq
        self.write_cmd(CMD_DESTROY_CQ, DestroyCq(cq_handle=handle).pack(),
                       C.sizeof(DestroyCqResp))

    # -- SRQ ----------------------------------------------------------------

    def create_srq(self, pd, max_wr=16, max_sge=1, srq_limit=0,
                   driver_in=bytes(8),
                   driver_out_len=C.sizeof(SrnicSrqResp)):
        """Returns (handle, core response, srnic response)."""
        h = pd.handle if hasattr(pd, "handle") else pd
        buf = self.write_cmd(CMD_CREATE_SRQ,
                             CreateSrq(pd_handle=h, max_wr=max_wr,
                                       max_sge=max_sge,
                                       srq_limit=srq_limit).pack(),
                             C.sizeof(CreateSrqResp), driver_in,
                             driver_out_len)
        resp = CreateSrqResp.from_buffer_copy(buf)
        drv = SrnicSrqResp.from_buffer_copy(
            buf.raw[C.sizeof(CreateSrqResp):].ljust(C.sizeof(SrnicSrqResp),
                                                   b"\0"))
        return resp.srq_handle, resp, drv

    def destroy_srq(self, handle):
        self.write_cmd(CMD_DESTROY_SRQ, DestroySrq(srq_handle=handle).pack(),
                       C.sizeof(DestroySrqResp))

    # -- QP -----------------------------------------------------------------

    def create_qp(self, pd, send_cq, recv_cq=None, max_send_wr=16,
                  max_recv_wr=16, max_send_sge=1, max_recv_sge=1,
                  max_inline_data=0, qp_type=QPT_RC, is_srq=0,
                  srq_handle=0, driver_in=bytes(8),
                  driver_out_len=C.sizeof(SrnicQpResp)):
        h = lambda o: o.handle if hasattr(o, "handle") else o  # noqa: E731
        recv_cq = send_cq if recv_cq is None else recv_cq
        req = CreateQp(pd_handle=h(pd), send_cq_handle=h(send_cq),
                       recv_cq_handle=h(recv_cq), srq_handle=srq_handle,
                       max_send_wr=max_send_wr, max_recv_wr=max_recv_wr,
                       max_send_sge=max_send_sge, max_recv_sge=max_recv_sge,
                       max_inline_data=max_inline_data, qp_type=qp_type,
                       is_srq=is_srq)
        buf = self.write_cmd(CMD_CREATE_QP, req.pack(),
                             C.sizeof(CreateQpResp), driver_in,
                             driver_out_len)
        resp = CreateQpResp.from_buffer_copy(buf)
        drv = SrnicQpResp.from_buffer_copy(
            buf.raw[C.sizeof(CreateQpResp):].ljust(C.sizeof(SrnicQpResp),
                                                  b"\0"))
        return Qp(self, resp.qp_handle, resp, drv)

    def destroy_qp(self, qp):
        handle = qp.handle if isinstance(qp, Qp) else qp
        self.write_cmd(CMD_DESTROY_QP, DestroyQp(qp_handle=handle).pack(),
                       C.sizeof(DestroyQpResp))

    def modify_qp(self, qp, attr_mask, driver_in=None, **fields):
        handle = qp.handle if isinstance(qp, Qp) else qp
        cmd = ModifyQp(qp_handle=handle, attr_mask=attr_mask)
        dest = fields.pop("dest", None)
        if dest is not None:
            cmd.dest = dest
        for k, v in fields.items():
            setattr(cmd, k, v)
        if driver_in is None:
            self.write_cmd(CMD_MODIFY_QP, cmd.pack())
        else:
            self.write_ex_cmd(CMD_MODIFY_QP, ExModifyQp(base=cmd).pack(),
                              driver_in)

    def query_qp(self, qp):
        handle = qp.handle if isinstance(qp, Qp) else qp
        buf = self.write_cmd(CMD_QUERY_QP, QueryQp(qp_handle=handle,
                                                   attr_mask=0).pack(),
                             C.sizeof(QueryQpResp))
        return QueryQpResp.from_buffer_copy(buf)

    def post_send(self, qp, wrs=(), sges=()):
        """POST_SEND; with no WRs, srnic's doorbell."""
        handle = qp.handle if isinstance(qp, Qp) else qp
        body = b"".join(w.pack() for w in wrs) + b"".join(
            struct.pack("<QII", *s) for s in sges)
        cmd = PostSend(qp_handle=handle, wr_count=len(wrs),
                       sge_count=len(sges), wqe_size=C.sizeof(SendWr))
        self.write_cmd(CMD_POST_SEND, cmd.pack() + body,
                       C.sizeof(PostSendResp))

    def post_recv(self, qp, wrs=(), sges=()):
        handle = qp.handle if isinstance(qp, Qp) else qp
        body = b"".join(w.pack() for w in wrs) + b"".join(
            struct.pack("<QII", *s) for s in sges)
        cmd = PostSend(qp_handle=handle, wr_count=len(wrs),
                       sge_count=len(sges), wqe_size=C.sizeof(RecvWr))
        self.write_cmd(CMD_POST_RECV, cmd.pack() + body,
                       C.sizeof(PostSendResp))

    # -- RC connection ------------------------------------------------------

    def connect_rc(self, qp, dest_qpn, dgid, sgid_index, psn=0x100,
                   dest_psn=0x100, timeout=14, retry_cnt=7, rnr_retry=7,
                   uc=False):
        """RESET -> INIT -> RTR -> RTS towards (dgid, dest_qpn); uc: with
        UC's attribute masks (no RNR, retry, timeout, READ resources)."""
        self.modify_qp(qp, QP_STATE | QP_PKEY_INDEX | QP_PORT |
                       QP_ACCESS_FLAGS, qp_state=INIT, port_num=1,
                       qp_access_flags=ACCESS_ALL)
        dest = QpDest(sgid_index=sgid_index, hop_limit=64, is_global=1,
                      port_num=1)
        dest.dgid[:] = list(dgid)
        rc_only = QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER
        self.modify_qp(qp, QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN |
                       QP_RQ_PSN | (0 if uc else rc_only),
                       qp_state=RTR, dest=dest, path_mtu=MTU_1024,
                       dest_qp_num=dest_qpn, rq_psn=dest_psn,
                       max_dest_rd_atomic=4, min_rnr_timer=1)
        rc_only = (QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY |
                   QP_MAX_QP_RD_ATOMIC)
        self.modify_qp(qp, QP_STATE | QP_SQ_PSN | (0 if uc else rc_only),
                       qp_state=RTS, timeout=timeout, retry_cnt=retry_cnt,
                       rnr_retry=rnr_retry, sq_psn=psn, max_rd_atomic=4)

    # -- async events -------------------------------------------------------

    def async_events(self, timeout=0.0):
        """(event_type, element) pairs readable within timeout seconds."""
        events = []
        while True:
            ready, _, _ = select.select([self.async_fd], [], [], timeout)
            if not ready:
                return events
            data = os.read(self.async_fd, 16)
            element, etype, _ = struct.unpack("<QII", data)
            events.append((etype, element))
            timeout = 0.0

    def close(self):
        while self.rings:
            r = self.rings.pop()
            if not r.map.closed:
                r.close()
        if self.async_fd is not None:
            try:
                os.close(self.async_fd)
            except OSError:
                pass
            self.async_fd = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def errno_of(fn, *args, **kw):
    """The errno fn(*args, **kw) fails with, or None if it succeeds."""
    try:
        fn(*args, **kw)
    except OSError as ex:
        return ex.errno
    return None


ERRNO_NAME = errno.errorcode
