# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --peer --timeout 900
"""Kernel ULPs between two kernels: this VM and a peer VM with its own
kernel on one virtual wire (tests/peer.py), each with one RDMA device in
its initial namespace, srnic or that kernel's rxe: srnic against srnic,
srnic as the initiator of an rxe target and rxe as the initiator of an
srnic target, the way a host running srnic meets rxe hosts (or hardware)
on a fabric. The ULPs' rdma_cm lives in init_net, so two kernels are the
only way their two ends can be on two different kinds of device.

NVMe over RDMA: the target (nvmet-rdma, tests/nvme_rdma.py's Target) on
the peer over a file there, the host (nvme-rdma) here; fio's crc32c
verification, and a write compared with the peer's file. RDS over RDMA:
messages to an echo socket on the peer, payloads checked.
"""
import hashlib
import os
import socket

import pytest

import harness
import nvme_rdma
import peer as peer_vm

pytestmark = pytest.mark.timeout(300)

LOCAL = peer_vm.LOCAL_ADDR.split("/")[0]
REMOTE = peer_vm.PEER_ADDR.split("/")[0]
BACKING = "/tmp/srnic-ns.img"
BACKING_MIB = 32

# (this VM's device, the peer's)
PAIRS = [("srnic", "srnic"), ("srnic", "rxe"), ("rxe", "srnic")]


@pytest.fixture(scope="module")
def peer():
    p = peer_vm.Peer()
    yield p
    p.close()


@pytest.fixture(scope="module", params=PAIRS,
                ids=[f"{a}-to-{b}" for a, b in PAIRS])
def devices(request, peer):
    """(local device, peer device) of the pair's kinds, on the wire."""
    local_kind, peer_kind = request.param
    local = peer_vm.make_device(local_kind, peer_vm.LOCAL_ADDR)
    remote = peer.python(
        "import peer; print(peer.make_device("
        f"{peer_kind!r}, {peer_vm.PEER_ADDR!r}))", timeout=180).stdout.strip()
    yield local, remote
    for name in harness.rdma_links():
        harness.run("rdma", "link", "delete", name, check=False,
                    timeout=120)


@pytest.fixture
def nvme(devices, peer):
    """The block device of the peer's nvmet-rdma namespace, connected."""
    target = (f"import nvme_rdma; t = nvme_rdma.Target({REMOTE!r}, "
              f"{BACKING!r})")
    peer.python(f"{target}; nvme_rdma.make_backing_file({BACKING!r}, "
                f"{BACKING_MIB} << 20); t.start()", timeout=120)
    try:
        yield nvme_rdma.connect(REMOTE)
    finally:
        nvme_rdma.disconnect()
        peer.python(f"{target}; t.stop()", check=False, timeout=180)


def test_nvme_over_rdma_between_two_kernels(devices, nvme, peer):
    ctrl = nvme_rdma.controller()
    assert (ctrl / "transport").read_text().strip() == "rdma"
    assert f"traddr={REMOTE}" in (ctrl / "address").read_text()
    nvme_rdma.verify_fio(nvme, "128k", "randrw", size="8M")
    nvme_rdma.verify_fio(nvme, "4k", "randwrite", size="2M")

    # A write here is in the peer's file, byte for byte.
    data = nvme_rdma.direct_write(nvme, 8 << 20, 4 << 20)
    out = peer.run("sh", "-c", f"dd if={BACKING} bs=1M skip=8 count=4 "
                   "status=none | sha256sum").stdout
    assert out.split()[0] == hashlib.sha256(data).hexdigest()


RDS_ECHO = """
import socket, sys
s = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET, 0)
s.bind(({remote!r}, 4001))
s.settimeout(60)
print("bound", flush=True)
for _ in range({count}):
    data, frm = s.recvfrom(65536)
    s.sendto(data[::-1], frm)
"""

RDS_SIZES = [1, 4096, 65536]


def test_rds_between_two_kernels(devices, peer):
    peer.run("modprobe", "rds_rdma")
    harness.run("modprobe", "rds_rdma")
    # The echo server runs in the background on the peer (the agent runs
    # one command at a time): started by a shell that returns at once.
    code = RDS_ECHO.format(remote=REMOTE, count=len(RDS_SIZES) * 2)
    peer.run("sh", "-c", 'python3 -c "$0" >/tmp/rds-echo.log 2>&1 &', code)
    harness.wait_for(lambda: "bound" in peer.run(
        "cat", "/tmp/rds-echo.log").stdout, timeout=30,
        what="the peer's RDS echo socket")
    s = socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET, 0)
    try:
        s.bind((LOCAL, 4000))
        s.settimeout(60)
        for size in RDS_SIZES * 2:
            msg = os.urandom(size)
            s.sendto(msg, (REMOTE, 4001))
            data, frm = s.recvfrom(size + 1)
            assert (data, frm) == (msg[::-1], (REMOTE, 4001)), size
    finally:
        s.close()
