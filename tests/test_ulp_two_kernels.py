# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --peer --timeout 900
"""Kernel ULPs between two kernels: this VM and a peer VM with its own
kernel on one virtual wire (tests/peer.py), each with one RDMA device in
its initial namespace, srnic or that kernel's rxe: srnic against srnic,
srnic as the initiator of an rxe target and rxe as the initiator of an
srnic target, the way a host running srnic meets rxe hosts (or hardware)
on a fabric. The ULPs' rdma_cm lives in init_net, so two kernels are the
only way their two ends can be on two different kinds of device.

NVMe over RDMA, iSER and SRP: the target (nvmet-rdma, LIO's isert, LIO's
ib_srpt: tests/nvme_rdma.py, tests/iser.py, tests/srp.py) on the peer over
a file there, the initiator (nvme-rdma, open-iscsi's iser, ib_srp) here;
fio's crc32c verification, and a write compared with the peer's file. NFS
over RDMA: nfsd on the peer (tests/nfs_rdma.py), mounted here with
proto=rdma, a tree of files written, compared with the peer's export and
read back through a fresh mount. RDS over RDMA: messages to an echo socket
on the peer, payloads checked.

make check (SRNIC_TEST_MATRIX=check) runs NVMe and RDS with each pair of
kinds and iSER, SRP and NFS with one pair each (one of each kind); make
check PLATFORM=NAME runs every pair.
"""
import hashlib
import json
import os
import re
import socket

import pytest

import harness
import iser
import nfs_rdma
import nvme_rdma
import peer as peer_vm
import srp

pytestmark = pytest.mark.timeout(300)

LOCAL = peer_vm.LOCAL_ADDR.split("/")[0]
REMOTE = peer_vm.PEER_ADDR.split("/")[0]
BACKING = "/tmp/srnic-ns.img"
BACKING_MIB = 32
# The iSER and SRP targets' LUN file on the peer.
LUN = "/tmp/srnic-lun.img"
LUN_MIB = 32
# The NFS server's export on the peer.
EXPORT = "/tmp/srnic-export"


@pytest.fixture
def nvme(two_kernel_devices, peer):
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


def test_nvme_over_rdma_between_two_kernels(two_kernel_devices, nvme,
                                           peer):
    ctrl = nvme_rdma.controller()
    assert (ctrl / "transport").read_text().strip() == "rdma"
    assert f"traddr={REMOTE}" in (ctrl / "address").read_text()
    nvme_rdma.verify_fio(nvme, "128k", "randrw", size="8M")
    nvme_rdma.verify_fio(nvme, "4k", "randwrite", size="2M")
    write_lands_in_peer_file(peer, nvme, BACKING)


def write_lands_in_peer_file(peer, dev, path, mib_offset=8, mib=4):
    """A write to dev here is in the peer's file path, byte for byte."""
    data = nvme_rdma.direct_write(dev, mib_offset << 20, mib << 20)
    out = peer.run("sh", "-c", f"dd if={path} bs=1M skip={mib_offset} "
                   f"count={mib} status=none | sha256sum").stdout
    assert out.split()[0] == hashlib.sha256(data).hexdigest()


def make_peer_lun(peer):
    peer.python(f"import nvme_rdma; nvme_rdma.make_backing_file({LUN!r}, "
                f"{LUN_MIB} << 20)")


@pytest.fixture
def iser_disk(two_kernel_devices, peer):
    """The disk of the peer's isert LUN, logged into over iser."""
    make_peer_lun(peer)
    peer.python(f"import iser; iser.Target({REMOTE!r}, {LUN!r}, "
                f"{LUN_MIB}).start()", timeout=120)
    initiator = iser.Initiator(REMOTE)
    try:
        yield initiator.login()
    finally:
        initiator.logout()
        peer.python("import iser; iser.Target.stop()", check=False,
                    timeout=180)


@pytest.mark.check_subset(two_kernel_devices=["srnic-to-rxe"])
def test_iser_between_two_kernels(two_kernel_devices, iser_disk, peer):
    out = harness.run("iscsiadm", "-m", "session", "-P", "1").stdout
    assert re.search(r"Iface Transport:\s*iser", out), out
    assert f"{REMOTE}:{iser.PORT}" in out, out
    nvme_rdma.verify_fio(iser_disk, "128k", "randrw", size="8M")
    write_lands_in_peer_file(peer, iser_disk, LUN)


@pytest.fixture
def srp_disk(two_kernel_devices, peer):
    """The disk of the peer's ib_srpt LUN, logged into by ib_srp."""
    local, remote = two_kernel_devices
    make_peer_lun(peer)
    peer.python(f"import srp; srp.Target({remote!r}, {REMOTE!r}, {LUN!r}, "
                f"{LUN_MIB}).start()", timeout=120)
    guid = peer.python("import srp; print(srp.service_guid())").stdout.strip()
    try:
        yield srp.login(local, REMOTE, guid)
    finally:
        srp.logout()
        peer.python("import srp; srp.Target.stop()", check=False,
                    timeout=180)


@pytest.mark.check_subset(two_kernel_devices=["rxe-to-srnic"])
def test_srp_between_two_kernels(two_kernel_devices, srp_disk, peer):
    size = int(open(f"/sys/block/{srp_disk.name}/size").read()) * 512
    assert size == LUN_MIB << 20
    nvme_rdma.verify_fio(srp_disk, "128k", "randrw", size="8M")
    write_lands_in_peer_file(peer, srp_disk, LUN)


@pytest.mark.check_subset(two_kernel_devices=["srnic-to-srnic"])
def test_nfs_between_two_kernels(two_kernel_devices, peer, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    peer.python(f"import nfs_rdma; nfs_rdma.Server({EXPORT!r}).start()",
                timeout=180)
    try:
        nfs_rdma.mount(REMOTE, mnt)
        try:
            assert harness.kernel_qps(two_kernel_devices[0], "RC"), \
                f"no RC QP of xprtrdma on {two_kernel_devices[0]}"
            written = nfs_rdma.write_tree(mnt)
        finally:
            harness.run("umount", str(mnt), timeout=60)
        exported = peer.python(
            "import json, nfs_rdma; print(json.dumps("
            f"nfs_rdma.tree_digests({EXPORT!r})))").stdout
        assert json.loads(exported) == written

        # A fresh mount reads the tree back from the peer, not a cache.
        nfs_rdma.mount(REMOTE, mnt)
        try:
            assert nfs_rdma.tree_digests(mnt) == written
        finally:
            harness.run("umount", str(mnt), timeout=60)
    finally:
        harness.run("umount", "-f", str(mnt), check=False, timeout=60)
        for mod in ("rpcrdma", "nfsv4", "nfs"):
            harness.run("modprobe", "-r", mod, check=False, timeout=60)
        peer.python("import nfs_rdma; nfs_rdma.Server.stop()", check=False,
                    timeout=180)


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


def test_rds_between_two_kernels(two_kernel_devices, peer):
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
        stop_rds(peer)


def stop_rds(peer):
    """Unload rds_rdma at both ends before the devices go. An RDS
    connection outlives its sockets and reconnects at once when it drops;
    a reconnect that binds its cm_id to a device ib_core is removing trips
    rdma_cm's own WARN_ON in resolve_prepare_src() (cma.c, 6.1: the state
    moved to DEVICE_REMOVAL between the bind and the check; seen once on
    this peer, any driver's removal can meet it). rds_rdma's exit stops
    reconnects first. On 7.2 its exit WARNs in rds_ib_recv_exit() (see
    test_rds.py), so it stays loaded there."""
    if harness.KERNEL >= (7, 2):
        return
    harness.run("modprobe", "-r", "rds_rdma", check=False, timeout=120)
    peer.run("modprobe", "-r", "rds_rdma", check=False, timeout=120)
