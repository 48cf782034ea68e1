# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""SRP on srnic: the kernel's LIO target with the SRP fabric (ib_srpt,
listening on RDMA/CM) and the SRP initiator (ib_srp, logged in through its
add_target sysfs file with an RDMA/CM destination), both on one srnic
device in init_net (the one-device topology).

The initiator registers each I/O's pages with IB_WR_REG_MR and the target
moves the data with RDMA READ and WRITE, invalidating with SEND with
invalidate (kernel/srnic_mr.c). fio writes with crc32c headers and reads
them back, and the LUN's backing file is compared byte for byte with what
was written.

The target is set up through LIO's configfs: its port by the device's
port GUID (srpt's guid_name), whose sessions are named by the initiator's
address, so the ACL is that address.
"""
import os
import re
from pathlib import Path

import pytest
import rtslib_fb

import harness
import nvme_rdma
import topology

# A ULP that stops answering leaves its tools waiting: a test ends in 3
# minutes (20 times what it takes here), the suite's VM in 10.
pytestmark = pytest.mark.timeout(180)

LUN_MIB = 64
RDMA_CM_PORT = 5555
SRPT = Path("/sys/kernel/config/target/srpt")


def srp_disk():
    """/dev/sdX of the SRP LUN once ib_srp has it, or None."""
    for dev in Path("/sys/block").glob("sd*"):
        host = re.search(r"/(host\d+)/", os.path.realpath(dev / "device"))
        if host and Path("/sys/class/srp_remote_ports").exists():
            proc = Path(f"/sys/class/scsi_host/{host.group(1)}/proc_name")
            if proc.exists() and proc.read_text().strip() == "ib_srp":
                return Path("/dev") / dev.name
    return None


def guid_hex(text):
    return text.strip().replace(":", "")


@pytest.fixture(scope="module")
def srp(tmp_path_factory):
    """(disk, backing file): a fileio LUN exported by ib_srpt on srnic0,
    logged into by ib_srp over RDMA/CM."""
    topo, veth = topology.build("one-device", "srnic")
    backing = nvme_rdma.make_backing_file(
        tmp_path_factory.mktemp("lio") / "lun0.img", LUN_MIB << 20)
    dev = topo.a.name
    so = None
    made = []
    try:
        for mod in ("target_core_mod", "target_core_file", "ib_srpt",
                    "ib_srp", "sd_mod"):
            harness.run("modprobe", mod)
        os.makedirs("/etc/rtslib-fb-target", exist_ok=True)
        so = rtslib_fb.FileIOStorageObject("lun0", str(backing),
                                           size=LUN_MIB << 20,
                                           write_back=False)
        iid = Path(f"/sys/class/infiniband/{dev}/ports/1/gids/0").read_text()
        iid = iid.strip().split(":")[4:]
        port = SRPT / ":".join(iid)          # srpt's guid_name
        tpg = port / "tpgt_1"
        lun = tpg / "lun" / "lun_0"
        acl = tpg / "acls" / topo.a.addr
        if not SRPT.is_dir():      # LIO makes a fabric's directory on mkdir
            SRPT.mkdir()
        for d in (port, tpg, lun):
            d.mkdir()
            made.append(d)
        (lun / "lun0").symlink_to(so.path)
        made.append(lun / "lun0")
        acl.mkdir()
        made.append(acl)
        (acl / "lun_0").mkdir()
        made.append(acl / "lun_0")
        (acl / "lun_0" / "lun0").symlink_to(lun)
        made.append(acl / "lun_0" / "lun0")
        (tpg / "enable").write_text("1\n")
        (SRPT / "discovery_auth" / "rdma_cm_port").write_text(
            f"{RDMA_CM_PORT}\n")
        guid = guid_hex(Path(f"/sys/class/infiniband/{dev}/node_guid")
                        .read_text())
        add = Path(f"/sys/class/infiniband_srp/srp-{dev}-1/add_target")
        add.write_text(f"id_ext={guid},ioc_guid={guid},"
                       f"dest={topo.a.addr}:{RDMA_CM_PORT},"
                       "max_cmd_per_lun=32\n")
        disk = harness.wait_for(srp_disk, timeout=60, what="the SRP disk")
        yield disk, backing
    finally:
        for rport in Path("/sys/class/srp_remote_ports").glob("port-*"):
            try:
                (rport / "delete").write_text("1\n")
            except OSError:
                pass
        harness.run("modprobe", "-r", "ib_srp", check=False, timeout=120)
        try:
            (SRPT / "discovery_auth" / "rdma_cm_port").write_text("0\n")
        except OSError:
            pass
        for path in reversed(made):
            try:
                path.unlink() if path.is_symlink() else path.rmdir()
            except OSError:
                pass
        if so:
            so.delete()
        for mod in ("ib_srpt", "target_core_file", "target_core_mod"):
            harness.run("modprobe", "-r", mod, check=False, timeout=120)
        topology.teardown(topo, veth)


def test_the_lun_is_reached_through_ib_srp(srp):
    disk = srp[0]
    size = int(Path(f"/sys/block/{disk.name}/size").read_text()) * 512
    assert size == LUN_MIB << 20
    ports = list(Path("/sys/class/srp_remote_ports").glob("port-*"))
    assert ports, "no SRP remote port"


@pytest.mark.parametrize("bs,rw", [("4k", "randwrite"), ("64k", "write"),
                                   ("512k", "randrw")])
def test_fio_crc32c_verify(srp, bs, rw):
    nvme_rdma.verify_fio(srp[0], bs, rw)


def test_what_the_initiator_writes_is_what_the_lun_file_holds(srp):
    nvme_rdma.direct_write_lands_in(srp[0], srp[1], 16 << 20)
