# SPDX-License-Identifier: GPL-2.0
"""Hand-made RoCEv2 packets for tests that play an untrusted remote peer.

Builds IP + UDP + BTH (+ extension headers) + payload + ICRC, with the ICRC
computed independently of srnic (zlib's CRC-32 over the masked packet, IBTA
annex A17), and sends them through a raw socket, so the IP header bytes the
ICRC covers are the ones we chose.
"""
import ipaddress
import socket
import struct
import zlib

ROCE_PORT = 4791

# Opcodes (RC unless named)
RC_SEND_ONLY = 0x04
RC_WRITE_ONLY = 0x0A
RC_ACK = 0x11
UD_SEND_ONLY = 0x64


def bth(opcode, dqpn, psn=0, pkey=0xFFFF, pad=0, tver=0, se=False,
        ack_req=False):
    flags = (0x80 if se else 0) | (pad << 4) | tver
    return struct.pack(">BBHII", opcode, flags, pkey, dqpn & 0xFFFFFF,
                       (0x80000000 if ack_req else 0) | (psn & 0xFFFFFF))


def deth(qkey, src_qpn):
    """A DETH (UD): the Q_Key and the sender's QPN."""
    return struct.pack(">II", qkey, src_qpn & 0xFFFFFF)


def _ipv4_header(src, dst, payload_len, ihl=5):
    options = b"\x01" * (4 * (ihl - 5))  # NOPs
    return struct.pack(">BBHHHBBH4s4s", 0x40 | ihl, 0, 4 * ihl + payload_len,
                       0x1234, 0x4000, 64, socket.IPPROTO_UDP, 0,
                       socket.inet_aton(src), socket.inet_aton(dst)) + options


def _ipv6_header(src, dst, payload_len):
    return struct.pack(">IHBB16s16s", 0x60000000, payload_len,
                       socket.IPPROTO_UDP, 64,
                       ipaddress.IPv6Address(src).packed,
                       ipaddress.IPv6Address(dst).packed)


def icrc(ip_udp, transport):
    """The ICRC of a packet whose IP+UDP headers are ip_udp."""
    m = bytearray(ip_udp + transport)
    if ip_udp[0] >> 4 == 6:
        m[0] |= 0x0F
        m[1:4] = b"\xff\xff\xff"
        m[7] = 0xFF
        udp = 40
    else:
        m[1] = 0xFF
        m[8] = 0xFF
        m[10:12] = b"\xff\xff"
        udp = 20
    m[udp + 6:udp + 8] = b"\xff\xff"
    m[udp + 8 + 4] = 0xFF  # BTH resv8a
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(m)))


def frame(src, dst, transport, good_icrc=True, ihl=5, udp_len=None):
    """IP + UDP + transport + ICRC, as bytes for a raw socket; udp_len
    overrides the UDP header's length field."""
    ipv6 = ":" in dst
    udp_len_field = udp_len
    udp_len = 8 + len(transport) + 4
    if udp_len_field is None:
        udp_len_field = udp_len
    make_ip = _ipv6_header if ipv6 else _ipv4_header
    args = (src, dst, udp_len) if ipv6 else (src, dst, udp_len, ihl)
    ip = make_ip(*args)
    udp = struct.pack(">HHHH", 0xC000, ROCE_PORT, udp_len_field, 0)
    crc = icrc(ip + udp, transport)
    if not good_icrc:
        crc = bytes(b ^ 0xFF for b in crc)
    return ip + udp + transport + crc


def send_raw(packet, dst):
    """Send a complete IP packet (we wrote the IP header ourselves)."""
    family = socket.AF_INET6 if ":" in dst else socket.AF_INET
    with socket.socket(family, socket.SOCK_RAW, socket.IPPROTO_RAW) as s:
        s.sendto(packet, (dst, 0))


if __name__ == "__main__":
    # python3 roce_packets.py SRC DST HEX_TRANSPORT [bad-icrc|ip-options|udp-short]
    import sys
    src, dst, hexdata = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else ""
    pkt = frame(src, dst, bytes.fromhex(hexdata),
                good_icrc=(mode != "bad-icrc"),
                ihl=6 if mode == "ip-options" else 5,
                # The UDP layer trims the datagram to 4 bytes of transport.
                udp_len=12 if mode == "udp-short" else None)
    send_raw(pkt, dst)
