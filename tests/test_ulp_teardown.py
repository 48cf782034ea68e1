# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600 --smp 2
"""Teardown under kernel ULP traffic: the RDMA device goes while a block
ULP moves data through it, on one srnic device in init_net, target and
initiator both on it: NVMe over RDMA (tests/nvme_rdma.py), iSER
(tests/iser.py) and SRP (tests/srp.py). Its own module, because each test
builds and loses its device (the ULPs' own suites keep one session for all
of their tests).
"""
import subprocess
import time

import pytest

import harness
import iser
import nvme_rdma
import srp
import topology

# A ULP that stops answering leaves its tools waiting: a test ends in 3
# minutes (20 times what it takes here), the suite's VM in 10.
pytestmark = pytest.mark.timeout(180)


# How the device goes: its rdma link deleted, its netdev deleted (srnic
# unregisters the device with it; until ib_core has, a QP's deliveries to
# its own device go on, srnic_local_dest_get()), or the module removed.
REMOVALS = {
    "rdma-link-delete": lambda topo: harness.run(
        "rdma", "link", "delete", topo.a.name, timeout=120),
    "netdev-delete": lambda topo: harness.run(
        "ip", "link", "delete", topo.a.netdev, timeout=120),
    "rmmod": lambda topo: harness.run("modprobe", "-r", "srnic",
                                      timeout=120),
}


class Nvme:
    """nvmet-rdma and nvme-rdma; ib_core's unregistration calls both
    ends' remove_one, which delete the controller and the target's
    queues."""

    def __init__(self, topo, backing):
        self.target = nvme_rdma.Target(topo.a.addr, backing)
        self.addr = topo.a.addr

    def start(self):
        self.target.start()
        return nvme_rdma.connect(self.addr)

    @staticmethod
    def gone():
        return nvme_rdma.controller() is None

    def stop(self):
        nvme_rdma.disconnect()
        self.target.stop()


class Iser:
    """LIO's isert and open-iscsi over iser: the connection fails with its
    device, and after replacement_timeout (a few seconds here) the
    session's I/O fails and its disk is no longer running
    (transport-offline); the session stays, recovering, until logout."""

    def __init__(self, topo, backing):
        self.target = iser.Target(topo.a.addr, backing, size_mib=32)
        self.initiator = iser.Initiator(topo.a.addr)

    def start(self):
        self.target.start()
        return self.initiator.login(replacement_timeout=5)

    @staticmethod
    def gone():
        return iser.disk() is None

    def stop(self):
        self.initiator.logout()
        iser.Target.stop()


class Srp:
    """ib_srpt and ib_srp: ib_srp's remove_one removes the SCSI host and
    its disk, ib_srpt's closes its sessions."""

    def __init__(self, topo, backing):
        self.target = srp.Target(topo.a.name, topo.a.addr, backing,
                                 size_mib=32)
        self.topo = topo

    def start(self):
        self.target.start()
        return srp.login(self.topo.a.name, self.topo.a.addr,
                         srp.service_guid())

    def gone(self):
        return srp.disk(self.topo.a.name) is None

    def stop(self):
        srp.logout()
        srp.Target.stop()


ULPS = {"nvme": Nvme, "iser": Iser, "srp": Srp}


# make check: each ULP under one removal, each removal once (the nine pairs:
# make check PLATFORM=NAME).
@pytest.mark.check_subset("nvme-rmmod", "iser-netdev-delete",
                          "srp-rdma-link-delete")
@pytest.mark.parametrize("removal", list(REMOVALS))
@pytest.mark.parametrize("ulp", list(ULPS))
def test_device_removal_under_io(tmp_path, ulp, removal):
    """The device both ends use goes while fio writes through it: ib_core's
    unregistration calls their remove_one; the removal returns, fio ends
    (with errors) rather than hanging, what the initiator had on the device
    goes away, and the kernel reports nothing (the VM runner checks)."""
    topo, veth = topology.build("one-device", "srnic")
    backing = nvme_rdma.make_backing_file(tmp_path / "lun.img", 32 << 20)
    ends = ULPS[ulp](topo, backing)
    fio = None
    try:
        dev = ends.start()
        fio = subprocess.Popen(
            ["fio", "--name=srnic", f"--filename={dev}", "--ioengine=libaio",
             "--direct=1", "--rw=randwrite", "--bs=64k", "--iodepth=8",
             "--size=32M", "--runtime=60", "--time_based"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(3)
        assert fio.poll() is None, fio.communicate()[0]
        REMOVALS[removal](topo)
        fio.communicate(timeout=150)
        harness.wait_for(ends.gone, timeout=120,
                         what=f"{ulp}'s initiator gone with its device")
        assert topo.a.name not in harness.rdma_links()
    finally:
        if fio and fio.poll() is None:
            fio.kill()
            fio.wait()
        ends.stop()
        topology.teardown(topo, veth)
