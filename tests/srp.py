# SPDX-License-Identifier: GPL-2.0
"""SRP's two ends, for tests/test_srp.py (one kernel) and
tests/test_ulp_two_kernels.py (the target on the peer VM): the kernel's LIO
target with the SRP fabric (ib_srpt, listening on RDMA/CM) and the SRP
initiator (ib_srp, logged in through its add_target sysfs file with an
RDMA/CM destination).

The target is set up through LIO's configfs: its port by the device's
port GUID (srpt's guid_name, GID 0's interface ID). srpt names an RDMA/CM
session after its cm_id's route.addr.src_addr, which on the passive side
is the target's own address (the login's destination; seen in its "Rejected
login for initiator ADDR" line), so the ACL is the target's address. srpt
answers logins to its service GUID (a node GUID of a device it serves,
its module parameter srpt_service_guid), which the initiator names as
id_ext and ioc_guid.
Target.stop() needs nothing of the Target that started it, so another
process (the peer agent's next command) can stop it.
"""
import os
import re
from pathlib import Path

import harness

LUN_MIB = 64
RDMA_CM_PORT = 5555
SRPT = Path("/sys/kernel/config/target/srpt")
TARGET_MODULES = ("target_core_mod", "target_core_file", "ib_srpt")
INITIATOR_MODULES = ("ib_srp", "sd_mod")


def service_guid():
    """ib_srpt's service GUID as ib_srp's add_target takes it (16 hex
    digits); ib_srpt loaded."""
    text = Path("/sys/module/ib_srpt/parameters/srpt_service_guid")
    return f"{int(text.read_text().strip(), 16):016x}"


class Target:
    """A fileio LUN of backing (size_mib MiB, LIO storage object name)
    exported by ib_srpt on RDMA device dev, to logins to addr (dev's) on
    RDMA_CM_PORT."""

    def __init__(self, dev, addr, backing, size_mib=LUN_MIB, name="lun0"):
        self.dev, self.addr = dev, addr
        self.backing, self.size_mib, self.name = backing, size_mib, name

    def port(self):
        """srpt's configfs port of dev: named by GID 0's interface ID."""
        gid = Path(f"/sys/class/infiniband/{self.dev}/ports/1/gids/0")
        return SRPT / ":".join(gid.read_text().strip().split(":")[4:])

    def start(self):
        import rtslib_fb

        for mod in TARGET_MODULES:
            harness.run("modprobe", mod)
        os.makedirs("/etc/rtslib-fb-target", exist_ok=True)
        so = rtslib_fb.FileIOStorageObject(self.name, str(self.backing),
                                           size=self.size_mib << 20,
                                           write_back=False)
        port = self.port()
        tpg = port / "tpgt_1"
        lun = tpg / "lun" / "lun_0"
        acl = tpg / "acls" / self.addr
        if not SRPT.is_dir():      # LIO makes a fabric's directory on mkdir
            SRPT.mkdir()
        for d in (port, tpg, lun):
            d.mkdir()
        (lun / self.name).symlink_to(so.path)
        acl.mkdir()
        (acl / "lun_0").mkdir()
        (acl / "lun_0" / self.name).symlink_to(lun)
        (tpg / "enable").write_text("1\n")
        (SRPT / "discovery_auth" / "rdma_cm_port").write_text(
            f"{RDMA_CM_PORT}\n")

    @staticmethod
    def stop():
        """srpt's ports, their TPGs, LUNs and ACLs, and every storage object
        gone, innermost first; the modules unloaded."""
        import rtslib_fb

        if SRPT.is_dir():
            try:
                (SRPT / "discovery_auth" / "rdma_cm_port").write_text("0\n")
            except OSError:
                pass
            for port in [p for p in SRPT.iterdir()
                         if p.is_dir() and p.name != "discovery_auth"]:
                remove_port(port)
        if Path("/sys/kernel/config/target").is_dir():
            for so in list(rtslib_fb.RTSRoot().storage_objects):
                so.delete()
        for mod in reversed(TARGET_MODULES):
            harness.run("modprobe", "-r", mod, check=False, timeout=120)


def remove_port(port):
    """One srpt port's configfs tree removed, innermost first."""
    if not port.is_dir():
        return
    for tpg in port.glob("tpgt_*"):
        (tpg / "enable").write_text("0\n")
        for link in tpg.glob("acls/*/lun_*/*"):
            if link.is_symlink():
                link.unlink()
        for d in tpg.glob("acls/*/lun_*"):
            d.rmdir()
        for d in tpg.glob("acls/*"):
            d.rmdir()
        for link in tpg.glob("lun/lun_*/*"):
            if link.is_symlink():
                link.unlink()
        for d in tpg.glob("lun/lun_*"):
            d.rmdir()
        tpg.rmdir()
    port.rmdir()


def disk(dev):
    """/dev/sdX of the SRP LUN ib_srp reaches through RDMA device dev, once
    it has it, or None."""
    if not Path("/sys/class/srp_remote_ports").exists():
        return None
    for blk in Path("/sys/block").glob("sd*"):
        host = re.search(r"/(host\d+)/", os.path.realpath(blk / "device"))
        if not host:
            continue
        shost = Path(f"/sys/class/scsi_host/{host.group(1)}")
        try:
            if ((shost / "proc_name").read_text().strip() == "ib_srp" and
                    (shost / "local_ib_device").read_text().strip() == dev):
                return Path("/dev") / blk.name
        except OSError:
            continue
    return None


def login(dev, target_addr, target_guid, src_addr=None):
    """ib_srp on RDMA device dev logged into the srpt at target_addr whose
    service GUID is target_guid, from src_addr if given (rdma_cm binds the
    connection to the device that has it); the LUN's block device."""
    for mod in INITIATOR_MODULES:
        harness.run("modprobe", mod)
    add = Path(f"/sys/class/infiniband_srp/srp-{dev}-1/add_target")
    src = f",src={src_addr}" if src_addr else ""
    add.write_text(f"id_ext={target_guid},ioc_guid={target_guid},"
                   f"dest={target_addr}:{RDMA_CM_PORT}{src},"
                   "max_cmd_per_lun=32\n")
    return harness.wait_for(lambda: disk(dev), timeout=60,
                            what=f"the SRP disk through {dev}")


def logout():
    """Every SRP remote port deleted and ib_srp unloaded, which waits for
    its removal work. Only then may a target on this kernel go: on 7.2,
    disabling ib_srpt's port while ib_srp's srp_remove_work() was still
    removing the initiator's port oopsed in scsi_host_busy_iter() (the
    SCSI host's tag set already torn down; seen once, an upstream race
    of ib_srp's, with the target's DREQ arriving meanwhile)."""
    for rport in Path("/sys/class/srp_remote_ports").glob("port-*"):
        try:
            (rport / "delete").write_text("1\n")
        except OSError:
            pass
    harness.run("modprobe", "-r", "ib_srp", check=False, timeout=120)
