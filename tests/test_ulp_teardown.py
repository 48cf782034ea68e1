# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600
"""Teardown under kernel ULP traffic: the RDMA device goes while NVMe over
RDMA (tests/nvme_rdma.py) moves data through it, on one srnic device in
init_net. Its own module, because each test builds and loses its device
(tests/test_nvme_rdma.py keeps one connection for all of its tests).
"""
import subprocess
import time

import pytest

import harness
import nvme_rdma
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


@pytest.mark.parametrize("removal", list(REMOVALS))
def test_device_removal_under_io(tmp_path, removal):
    """The device both ULPs use goes while fio writes through it: ib_core's
    unregistration calls their remove_one, which tears the controller and
    the target's queues down; the removal returns, fio ends with errors
    rather than hanging, the controller goes away, and the kernel reports
    nothing (the VM runner checks)."""
    topo, veth = topology.build("one-device", "srnic")
    backing = nvme_rdma.make_backing_file(tmp_path / "ns1.img", 32 << 20)
    target = nvme_rdma.Target(topo.a.addr, backing)
    fio = None
    try:
        target.start()
        dev = nvme_rdma.connect(topo.a.addr)
        fio = subprocess.Popen(
            ["fio", "--name=srnic", f"--filename={dev}", "--ioengine=libaio",
             "--direct=1", "--rw=randwrite", "--bs=64k", "--iodepth=8",
             "--size=32M", "--runtime=60", "--time_based"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(3)
        assert fio.poll() is None, fio.communicate()[0]
        REMOVALS[removal](topo)
        fio.communicate(timeout=180)
        harness.wait_for(lambda: nvme_rdma.controller() is None, timeout=120,
                         what="the controller gone with its device")
        assert topo.a.name not in harness.rdma_links()
    finally:
        if fio and fio.poll() is None:
            fio.kill()
            fio.wait()
        nvme_rdma.disconnect()
        target.stop()
        topology.teardown(topo, veth)
