# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""iSER on srnic: the kernel's LIO target with the isert fabric (ib_isert,
configured through rtslib-fb, targetcli's library: targetcli itself wants a
D-Bus the VM has not) and open-iscsi's iser transport (ib_iser,
iscsid and iscsiadm), both on one srnic device in init_net (the
one-device topology; the ULPs' rdma_cm is in init_net).

The initiator registers each I/O's pages with IB_WR_REG_MR and the target
moves the data with RDMA READ and WRITE, invalidating with SEND with
invalidate (kernel/srnic_mr.c). fio writes with crc32c headers and reads
them back, and the LUN's backing file is compared byte for byte with what
was written.
"""
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import rtslib_fb

import harness
import nvme_rdma
import topology

# A ULP that stops answering leaves its tools waiting: a test ends in 3
# minutes (20 times what it takes here), the suite's VM in 10.
pytestmark = pytest.mark.timeout(180)

IQN = "iqn.2026-12.org.srnic:test-iser"
LUN_MIB = 64


def iscsi_disk():
    """/dev/sdX of IQN's LUN 0 once the session has attached it, or None
    (iscsiadm's "Attached scsi disk sdX State: running")."""
    out = harness.run("iscsiadm", "-m", "session", "-P", "3",
                      check=False).stdout
    if IQN not in out:
        return None
    m = re.search(r"Attached scsi disk (\w+)\s+State: running", out)
    return Path("/dev") / m.group(1) if m else None


@pytest.fixture(scope="module")
def iser(tmp_path_factory):
    """(disk, backing file): a fileio LUN exported by LIO's isert on
    srnic0's address, logged into by open-iscsi over iser."""
    topo, veth = topology.build("one-device", "srnic")
    backing = nvme_rdma.make_backing_file(
        tmp_path_factory.mktemp("lio") / "lun0.img", LUN_MIB << 20)
    iscsid = None
    portal = f"{topo.a.addr}:3260"
    try:
        # sd_mod too: no udev in the VM loads it for the LUN.
        for mod in ("target_core_mod", "target_core_file", "iscsi_target_mod",
                    "ib_isert", "ib_iser", "sd_mod"):
            harness.run("modprobe", mod)
        # rtslib points LIO's dbroot there, and fails where it is missing.
        os.makedirs("/etc/rtslib-fb-target", exist_ok=True)
        so = rtslib_fb.FileIOStorageObject("lun0", str(backing),
                                           size=LUN_MIB << 20,
                                           write_back=False)
        tpg = rtslib_fb.TPG(rtslib_fb.Target(rtslib_fb.FabricModule("iscsi"),
                                             IQN), 1)
        rtslib_fb.LUN(tpg, 0, so)
        rtslib_fb.NetworkPortal(tpg, topo.a.addr, 3260).iser = True
        for name, value in (("authentication", "0"),
                            ("demo_mode_write_protect", "0"),
                            ("generate_node_acls", "1"),
                            ("cache_dynamic_acls", "1")):
            tpg.set_attribute(name, value)
        tpg.enable = True
        # Its own session: a stopping iscsid signals its process group.
        iscsid = subprocess.Popen(["iscsid", "-f"], start_new_session=True)
        time.sleep(1)
        harness.run("iscsiadm", "-m", "discovery", "-t", "sendtargets", "-p",
                    portal, "-I", "iser", timeout=120)
        harness.run("iscsiadm", "-m", "node", "-T", IQN, "-p", portal, "-I",
                    "iser", "--login", timeout=120)
        disk = harness.wait_for(iscsi_disk, timeout=60,
                                what=f"the disk of {IQN}")
        yield disk, backing, portal
    finally:
        harness.run("iscsiadm", "-m", "node", "-T", IQN, "--logout",
                    check=False, timeout=120)
        harness.run("iscsiadm", "-m", "node", "-o", "delete", "-T", IQN,
                    check=False, timeout=60)
        if iscsid:
            iscsid.terminate()
            iscsid.wait(timeout=30)
        rtslib_fb.RTSRoot().clear_existing(confirm=True)
        for mod in ("ib_iser", "ib_isert", "iscsi_target_mod",
                    "target_core_file", "target_core_mod"):
            harness.run("modprobe", "-r", mod, check=False, timeout=120)
        topology.teardown(topo, veth)


def test_the_session_runs_over_iser(iser):
    _, _, portal = iser
    out = harness.run("iscsiadm", "-m", "session", "-P", "1").stdout
    assert re.search(r"Iface Transport:\s*iser", out), out
    assert portal in out, out


@pytest.mark.parametrize("bs,rw", [("4k", "randwrite"), ("64k", "write"),
                                   ("512k", "randrw")])
def test_fio_crc32c_verify(iser, bs, rw):
    nvme_rdma.verify_fio(iser[0], bs, rw)


def test_what_the_initiator_writes_is_what_the_lun_file_holds(iser):
    nvme_rdma.direct_write_lands_in(iser[0], iser[1], 16 << 20)
