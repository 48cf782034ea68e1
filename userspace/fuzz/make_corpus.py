#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Write the seed corpus of fuzz_wire: RoCEv2 transport packets (BTH to ICRC).

    python3 userspace/fuzz/make_corpus.py [userspace/fuzz/corpus/wire]

Valid packets of every header chain srnic accepts, plus malformed ones just
past each check of srnic_parse_transport(). The layouts are IBTA's, written
out here independently of kernel/srnic_wire.[ch]. The ICRC is a fixed
pattern: the parser does not check it (the kernel's caller does), and
fuzz_wire computes it itself. Only files named seed-* are rewritten; inputs
merged in from fuzzing runs (make fuzz-merge) are left alone.
"""

import os
import struct
import sys

RC, UC, UD, CNP, XRC = 0x00, 0x20, 0x60, 0x80, 0xA0
OP = {
    "SEND_FIRST": 0x00, "SEND_MIDDLE": 0x01, "SEND_LAST": 0x02,
    "SEND_LAST_IMM": 0x03, "SEND_ONLY": 0x04, "SEND_ONLY_IMM": 0x05,
    "WRITE_FIRST": 0x06, "WRITE_MIDDLE": 0x07, "WRITE_LAST": 0x08,
    "WRITE_LAST_IMM": 0x09, "WRITE_ONLY": 0x0A, "WRITE_ONLY_IMM": 0x0B,
    "READ_REQUEST": 0x0C, "READ_RESPONSE_FIRST": 0x0D,
    "READ_RESPONSE_MIDDLE": 0x0E, "READ_RESPONSE_LAST": 0x0F,
    "READ_RESPONSE_ONLY": 0x10, "ACK": 0x11, "ATOMIC_ACK": 0x12,
    "CMP_SWAP": 0x13, "FETCH_ADD": 0x14, "SEND_LAST_INV": 0x16,
    "SEND_ONLY_INV": 0x17, "ATOMIC_WRITE": 0x1D,
}
ICRC = b"\xde\xad\xbe\xef"


def bth(opcode, pad=0, se=False, pkey=0xFFFF, dqpn=0x000011, psn=0x000100,
        ack_req=False, tver=0):
    flags = (0x80 if se else 0) | (pad << 4) | tver
    apsn = (0x80000000 if ack_req else 0) | psn
    return struct.pack(">BBHII", opcode, flags, pkey, dqpn, apsn)


def xrceth(srqn=0x42):
    return struct.pack(">I", srqn)


def deth(qkey=0x11111111, sqpn=0x000022):
    return struct.pack(">II", qkey, sqpn)


def reth(va=0x7F0000001000, rkey=0x1234, dma_len=64):
    return struct.pack(">QII", va, rkey, dma_len)


def atmeth(va=0x7F0000002000, rkey=0x1234, swap_add=5, compare=0):
    return struct.pack(">QIQQ", va, rkey, swap_add, compare)


def aeth(syndrome=0x1F, msn=1):
    return struct.pack(">I", syndrome << 24 | msn)


def atmack(orig=0x0123456789ABCDEF):
    return struct.pack(">Q", orig)


def immdt(imm=0xC0FFEE):
    return struct.pack(">I", imm)


def ieth(rkey=0x5678):
    return struct.pack(">I", rkey)


def payload(n):
    return bytes((i * 31 + 7) & 0xFF for i in range(n))


def pkt(opcode, hdrs=b"", body=b"", pad=0, **kw):
    return bth(opcode, pad=pad, **kw) + hdrs + body + b"\0" * pad + ICRC


def seeds():
    s = {}
    # RC requests
    s["rc-send-only"] = pkt(RC | OP["SEND_ONLY"], body=payload(64), ack_req=True)
    s["rc-send-only-pad"] = pkt(RC | OP["SEND_ONLY"], body=payload(61), pad=3,
                                ack_req=True, se=True)
    s["rc-send-only-empty"] = pkt(RC | OP["SEND_ONLY"])
    s["rc-send-first"] = pkt(RC | OP["SEND_FIRST"], body=payload(256))
    s["rc-send-middle"] = pkt(RC | OP["SEND_MIDDLE"], body=payload(256), psn=0x101)
    s["rc-send-last"] = pkt(RC | OP["SEND_LAST"], body=payload(9), pad=3, psn=0x102,
                            ack_req=True)
    s["rc-send-last-imm"] = pkt(RC | OP["SEND_LAST_IMM"], immdt(), payload(14), pad=2)
    s["rc-send-only-imm"] = pkt(RC | OP["SEND_ONLY_IMM"], immdt(), payload(32),
                                ack_req=True)
    s["rc-send-only-inv"] = pkt(RC | OP["SEND_ONLY_INV"], ieth(), payload(8))
    s["rc-send-last-inv"] = pkt(RC | OP["SEND_LAST_INV"], ieth(), payload(7), pad=1)
    s["rc-write-first"] = pkt(RC | OP["WRITE_FIRST"], reth(dma_len=1024), payload(256))
    s["rc-write-middle"] = pkt(RC | OP["WRITE_MIDDLE"], body=payload(256), psn=0x101)
    s["rc-write-last"] = pkt(RC | OP["WRITE_LAST"], body=payload(255), pad=1, psn=0x103)
    s["rc-write-last-imm"] = pkt(RC | OP["WRITE_LAST_IMM"], immdt(), payload(256))
    s["rc-write-only"] = pkt(RC | OP["WRITE_ONLY"], reth(dma_len=5), payload(5), pad=3,
                             ack_req=True)
    s["rc-write-only-zero"] = pkt(RC | OP["WRITE_ONLY"], reth(va=0, rkey=0, dma_len=0))
    s["rc-write-only-imm"] = pkt(RC | OP["WRITE_ONLY_IMM"], reth(dma_len=16) + immdt(),
                                 payload(16))
    s["rc-read-request"] = pkt(RC | OP["READ_REQUEST"], reth(dma_len=4096), ack_req=True)
    s["rc-cmp-swap"] = pkt(RC | OP["CMP_SWAP"], atmeth(compare=1, swap_add=2))
    s["rc-fetch-add"] = pkt(RC | OP["FETCH_ADD"], atmeth(swap_add=1))
    s["rc-atomic-write"] = pkt(RC | OP["ATOMIC_WRITE"], reth(dma_len=8), payload(8))
    # RC responses
    s["rc-ack"] = pkt(RC | OP["ACK"], aeth())
    s["rc-nak-psn-seq"] = pkt(RC | OP["ACK"], aeth(syndrome=0x60, msn=3))
    s["rc-nak-remote-access"] = pkt(RC | OP["ACK"], aeth(syndrome=0x62, msn=3))
    s["rc-rnr-nak"] = pkt(RC | OP["ACK"], aeth(syndrome=0x20 | 12, msn=3))
    s["rc-atomic-ack"] = pkt(RC | OP["ATOMIC_ACK"], aeth() + atmack())
    s["rc-read-response-first"] = pkt(RC | OP["READ_RESPONSE_FIRST"], aeth(), payload(256))
    s["rc-read-response-middle"] = pkt(RC | OP["READ_RESPONSE_MIDDLE"], body=payload(256))
    s["rc-read-response-last"] = pkt(RC | OP["READ_RESPONSE_LAST"], aeth(), payload(13),
                                     pad=3)
    s["rc-read-response-only"] = pkt(RC | OP["READ_RESPONSE_ONLY"], aeth(), payload(64))
    # UC
    s["uc-send-only"] = pkt(UC | OP["SEND_ONLY"], body=payload(16))
    s["uc-write-first"] = pkt(UC | OP["WRITE_FIRST"], reth(dma_len=512), payload(256))
    s["uc-write-only-imm"] = pkt(UC | OP["WRITE_ONLY_IMM"], reth(dma_len=4) + immdt(),
                                 payload(4))
    # UD
    s["ud-send-only"] = pkt(UD | OP["SEND_ONLY"], deth(), payload(40), dqpn=1,
                            pkey=0xFFFF)
    s["ud-send-only-imm"] = pkt(UD | OP["SEND_ONLY_IMM"], deth() + immdt(), payload(3),
                                pad=1)
    # XRC
    s["xrc-send-only"] = pkt(XRC | OP["SEND_ONLY"], xrceth(), payload(12))
    s["xrc-write-only-imm"] = pkt(XRC | OP["WRITE_ONLY_IMM"],
                                  xrceth() + reth(dma_len=4) + immdt(), payload(4))
    s["xrc-cmp-swap"] = pkt(XRC | OP["CMP_SWAP"], xrceth() + atmeth())
    s["xrc-read-request"] = pkt(XRC | OP["READ_REQUEST"], xrceth() + reth())
    s["xrc-atomic-ack"] = pkt(XRC | OP["ATOMIC_ACK"], aeth() + atmack())
    # RoCEv2 CNP: BTH and 16 reserved bytes
    s["cnp"] = pkt(CNP | 0x01, bytes(16), dqpn=0x11, psn=0)

    # Malformed: one step past each check.
    s["bad-empty"] = b""
    s["bad-bth-only"] = bth(RC | OP["SEND_ONLY"])
    s["bad-short-by-one"] = pkt(RC | OP["SEND_ONLY"])[:-1]
    s["bad-tver"] = pkt(RC | OP["SEND_ONLY"], body=payload(4), tver=1)
    s["bad-opcode-rd"] = pkt(0x40 | OP["SEND_ONLY"], body=payload(4))
    s["bad-opcode-reserved"] = pkt(RC | 0x15, body=payload(4))
    s["bad-opcode-flush"] = pkt(RC | 0x1C, reth())
    s["bad-truncated-reth"] = pkt(RC | OP["WRITE_ONLY"], reth())[:-5]
    s["bad-truncated-atmeth"] = pkt(RC | OP["CMP_SWAP"], atmeth())[:-1]
    s["bad-ack-with-payload"] = pkt(RC | OP["ACK"], aeth(), payload(4))
    s["bad-read-request-pad"] = pkt(RC | OP["READ_REQUEST"], reth(), pad=2)
    s["bad-ack-pad-bits"] = bth(RC | OP["ACK"], pad=1) + aeth() + ICRC
    s["bad-pad-in-middle"] = pkt(RC | OP["SEND_MIDDLE"], body=payload(253), pad=3)
    s["bad-pad-beyond-payload"] = (bth(RC | OP["SEND_ONLY"], pad=2) + b"\0" + ICRC)
    s["bad-cnp-short"] = pkt(CNP | 0x01, bytes(15))
    s["rc-send-only-pkey-7fff"] = pkt(RC | OP["SEND_ONLY"], body=payload(4), pkey=0x7FFF)
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "wire")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if name.startswith("seed-"):
            os.unlink(os.path.join(out, name))
    for name, data in sorted(seeds().items()):
        with open(os.path.join(out, "seed-" + name), "wb") as f:
            f.write(data)
    print(f"make_corpus: {len(seeds())} seeds in {out}")


if __name__ == "__main__":
    main()
