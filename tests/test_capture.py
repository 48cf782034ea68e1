# SPDX-License-Identifier: GPL-2.0
"""Packet capture (issue 25, item 4; kernel/srnic_capture.c): a device's
capture netdev (sysfs ``capture``) shows every RoCEv2 packet it sends and
receives as an Ethernet frame, local deliveries included, which no other
netdev sees. `tcpdump -i CAP -w FILE` records an RC exchange; `tcpdump -r`
reads it back, and each frame is parsed here: Ethernet, IPv4, UDP port
4791, the BTH's opcode, destination QP and PSN against the exchange, and
the ICRC recomputed over the masked headers as a receiving NIC checks it.
"""
import os
import signal
import struct
import subprocess
import time
import zlib

import pytest

import harness
import topology
import verbs_enums as e
from rc_verbs import RCPair, check_ok, recv_wr, send_wr, sge

pytestmark = pytest.mark.timeout(180)

SEND_SIZE = 4096
WRITE_SIZE = 1000
ROCE_PORT = 4791
# BTH opcodes (RC): what the exchange sends
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_ONLY, ACK = 0x0a, 0x11


def switch(end, name):
    with open(harness.device_switch_path(end, name)) as f:
        return f.read().strip()


class Capture:
    """tcpdump on end's capture netdev (or on netdev), writing a pcap, until
    stop()."""

    def __init__(self, end, path, netdev=None):
        if netdev is None:
            harness.set_device_switch(end, "capture", 1)
            netdev = switch(end, "capture_netdev")
            assert netdev, "capture is on but names no netdev"
        self.netdev, self.path = netdev, path
        self.proc = subprocess.Popen(
            end.cmd("tcpdump", "-i", netdev, "--immediate-mode", "-U",
                    "-Z", "root", "-w", path, "udp"),
            stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()     # "listening on ..." once open
        assert "listening on" in line, line

    def stop(self):
        """After the pcap stopped growing for half a second (tcpdump may
        not have read the last packets yet), SIGINT."""
        size, stable = -1, 0
        for _ in range(50):
            now = os.path.getsize(self.path) if os.path.exists(self.path) \
                else 0
            stable = stable + 1 if now == size else 0
            if stable >= 5:
                break
            size = now
            time.sleep(0.1)
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err
        return err


def pcap_frames(path):
    """The frames of a pcap file (classic format, as tcpdump -w writes)."""
    data = open(path, "rb").read()
    magic, = struct.unpack("<I", data[:4])
    assert magic == 0xa1b2c3d4, hex(magic)
    linktype, = struct.unpack("<I", data[20:24])
    assert linktype == 1, linktype          # LINKTYPE_ETHERNET
    frames, off = [], 24
    while off < len(data):
        _, _, caplen, length = struct.unpack("<IIII", data[off:off + 16])
        assert caplen == length, (caplen, length)
        frames.append(data[off + 16:off + 16 + caplen])
        off += 16 + caplen
    return frames


def icrc_ok(ip_packet):
    """Whether the ICRC at the end of an IPv4 RoCEv2 packet is right: CRC-32
    over 64 bits of ones, the IP header with TOS, TTL and checksum masked,
    the UDP header with its checksum masked, the BTH with its reserved byte
    before the destination QP masked, the rest, as IBTA's RoCEv2 annex
    says."""
    ihl = (ip_packet[0] & 0xf) * 4
    b = bytearray(ip_packet[:-4])
    b[1] = 0xff                     # TOS
    b[8] = 0xff                     # TTL
    b[10:12] = b"\xff\xff"          # header checksum
    b[ihl + 6:ihl + 8] = b"\xff\xff"    # UDP checksum
    b[ihl + 8 + 4] = 0xff           # BTH byte 4 (F, B, reserved)
    icrc, = struct.unpack("<I", ip_packet[-4:])
    return zlib.crc32(b"\xff" * 8 + bytes(b)) == icrc


def roce_packets(path):
    """(source MAC, destination MAC, opcode, dest QP, PSN, payload bytes) of
    each RoCEv2 frame of the pcap, every one checked for its IPv4 header
    and ICRC."""
    found = []
    for f in pcap_frames(path):
        dst_mac, src_mac = f[0:6], f[6:12]
        ethertype, = struct.unpack("!H", f[12:14])
        if ethertype != 0x0800:
            continue
        ip = f[14:]
        ihl = (ip[0] & 0xf) * 4
        total, = struct.unpack("!H", ip[2:4])
        assert total == len(ip), (total, len(ip))
        # The IPv4 header checksum is filled in, as on a wire.
        words = struct.unpack(f"!{ihl // 2}H", ip[:ihl])
        s = sum(words)
        while s >> 16:
            s = (s & 0xffff) + (s >> 16)
        assert s == 0xffff, "bad IPv4 header checksum"
        if ip[9] != 17:
            continue
        sport, dport, ulen = struct.unpack("!HHH", ip[ihl:ihl + 6])
        if dport != ROCE_PORT:
            continue
        assert ulen == total - ihl, (ulen, total, ihl)
        assert icrc_ok(ip), "bad ICRC"
        bth = ip[ihl + 8:ihl + 20]
        opcode = bth[0]
        pad = (bth[1] >> 4) & 3
        dqpn = int.from_bytes(bth[5:8], "big")
        psn = int.from_bytes(bth[9:12], "big")
        hdr = 12 + (16 if opcode == WRITE_ONLY else 0) + \
            (4 if opcode == ACK else 0)
        payload = ulen - 8 - hdr - pad - 4
        found.append((src_mac, dst_mac, opcode, dqpn, psn, payload))
    return found


def tcpdump_reads(path):
    """tcpdump -r: how many UDP port 4791 packets it reads back."""
    out = harness.run("tcpdump", "-r", path, "-nn", "udp", "port",
                      str(ROCE_PORT)).stdout
    return len(out.splitlines())


def exchange(pair):
    """a SENDs SEND_SIZE bytes to b, then WRITEs WRITE_SIZE into b's MR."""
    a, b = pair.a, pair.b
    src, dst = a.mr(SEND_SIZE), b.mr(SEND_SIZE)
    b.qp.post_recv(recv_wr(1, [sge(dst, 0, SEND_SIZE)]))
    a.qp.post_send(send_wr(2, e.IBV_WR_SEND, [sge(src, 0, SEND_SIZE)]))
    check_ok(a.poll()[0], 2, e.IBV_WC_SEND)
    check_ok(b.poll()[0], 1, e.IBV_WC_RECV, SEND_SIZE)
    a.qp.post_send(send_wr(3, e.IBV_WR_RDMA_WRITE,
                           [sge(src, 0, WRITE_SIZE)], remote=(dst, 0)))
    check_ok(a.poll()[0], 3, e.IBV_WC_RDMA_WRITE)


def requests(pair, mtu):
    """The request packets the exchange sends: (opcode, dest QP, PSN,
    payload bytes)."""
    n = SEND_SIZE // mtu
    ops = ([SEND_ONLY] if n == 1 else
           [SEND_FIRST] + [SEND_MIDDLE] * (n - 2) + [SEND_LAST])
    psn = pair.psn[pair.a]
    want = [(op, pair.b.qp.qp_num, psn + i, mtu) for i, op in enumerate(ops)]
    want.append((WRITE_ONLY, pair.b.qp.qp_num, psn + n, WRITE_SIZE))
    return want


def mac(end):
    return bytes.fromhex(harness.run(*end.cmd(
        "cat", f"/sys/class/net/{end.netdev}/address")).stdout.strip()
        .replace(":", ""))


def capturing_topology(topo_id):
    """topo_id's topology of srnic devices; their capture off afterwards."""
    topo, veth = topology.build(topo_id, "srnic")
    try:
        yield topo
    finally:
        for end in {topo.a.name: topo.a, topo.b.name: topo.b}.values():
            harness.set_device_switch(end, "capture", 0)
        topology.teardown(topo, veth)


@pytest.fixture
def one_device():
    yield from capturing_topology("one-device")


@pytest.fixture
def two_netns():
    yield from capturing_topology("veth-two-netns")


def test_capture_shows_one_devices_local_delivery(one_device, tmp_path):
    """Two QPs of one device: each request and ACK shows twice on its
    capture netdev, sent and received, whole, with a good ICRC; the netdev
    the device is bound to sees none of it."""
    end = one_device.a
    assert switch(end, "capture") == "0"
    assert switch(end, "capture_netdev") == ""
    pair = RCPair(one_device)
    try:
        pair.connect()
        cap = Capture(end, str(tmp_path / "local.pcap"))
        assert cap.netdev == f"{end.name}cap"
        # The netdev the device is bound to, for contrast.
        wire = Capture(end, str(tmp_path / "netdev.pcap"), end.netdev)
        exchange(pair)
        want = requests(pair, 128 << pair.mtu)
        a_qpn = pair.a.qp.qp_num
        cap.stop()
        wire.stop()
    finally:
        pair.close()
    got = roce_packets(cap.path)
    print(f"{len(got)} RoCEv2 frames on {cap.netdev}")
    assert tcpdump_reads(cap.path) == len(got)
    assert tcpdump_reads(wire.path) == 0
    own = mac(end)
    sent = [p[2:] for p in got if p[0] == own]
    received = [p[2:] for p in got if p[1] == own and p[0] != own]
    for w in want:
        assert sent.count(w) == 1, (w, sent)
        assert received.count(w) == 1, (w, received)
    acks = [p for p in sent if p[0] == ACK]
    assert acks and all(p[1] == a_qpn and p[3] == 0 for p in acks), acks
    assert sorted(p for p in received if p[0] == ACK) == sorted(acks)
    # Off: the netdev goes.
    harness.set_device_switch(end, "capture", 0)
    assert switch(end, "capture_netdev") == ""
    assert not os.path.exists(f"/sys/class/net/{cap.netdev}")


def test_capture_shows_what_a_device_sends_and_receives_on_a_wire(
        two_netns, tmp_path):
    """Two devices over a veth: a's capture holds its requests, sent once,
    and b's ACKs, received once from b's MAC; b's holds the same packets
    the other way round."""
    a_end, b_end = two_netns.a, two_netns.b
    pair = RCPair(two_netns)
    try:
        pair.connect()
        caps = [Capture(end, str(tmp_path / f"{end.name}.pcap"))
                for end in (a_end, b_end)]
        exchange(pair)
        want = requests(pair, 128 << pair.mtu)
        for c in caps:
            c.stop()
    finally:
        pair.close()
    a_mac, b_mac = mac(a_end), mac(b_end)
    a_got, b_got = roce_packets(caps[0].path), roce_packets(caps[1].path)
    a_sent = [p[2:] for p in a_got if p[0] == a_mac]
    b_received = [p[2:] for p in b_got if p[0] == a_mac and p[1] == b_mac]
    assert [p for p in a_sent if p[0] != ACK] == want, a_sent
    assert [p for p in b_received if p[0] != ACK] == want, b_received
    b_acks = [p[2:] for p in b_got if p[0] == b_mac and p[2] == ACK]
    a_acks = [p[2:] for p in a_got if p[0] == b_mac and p[1] == a_mac]
    assert b_acks and a_acks == b_acks, (a_acks, b_acks)
