# SPDX-License-Identifier: GPL-2.0
"""NVMe over RDMA on srnic: the kernel's nvmet-rdma target and nvme-rdma
host, driven by their own tools (configfs, nvme-cli's `nvme connect -t
rdma`; tests/nvme_rdma.py) and checked with fio's crc32c verification and
a byte-for-byte comparison with the target's backing file.

Both ULPs are kernel verbs consumers: the host registers each I/O's pages
with IB_WR_REG_MR on its kernel QPs and the target invalidates them with
a SEND with invalidate (or the host with LOCAL_INV), which is srnic's fast
registration (kernel/srnic_mr.c, srnic_mr_fast_reg()). Both use the
kernel's rdma_cm in init_net, so the srnic device is there: the one-device
topology, target and host on one srnic device.
"""
import hashlib
import mmap
import os
import re
import time
from pathlib import Path

import pytest

import harness
import nvme_rdma
import topology

NS_MIB = 64


@pytest.fixture(scope="module")
def nvme(tmp_path_factory):
    """(block device, backing file, topology): srnic0 on one-device, an
    nvmet-rdma target on its address, and nvme-rdma connected to it."""
    topo, veth = topology.build("one-device", "srnic")
    backing = nvme_rdma.make_backing_file(
        tmp_path_factory.mktemp("nvmet") / "ns1.img", NS_MIB << 20)
    target = nvme_rdma.Target(topo.a.addr, backing)
    try:
        target.start()
        dev = nvme_rdma.connect(topo.a.addr)
        yield dev, backing, topo
    finally:
        nvme_rdma.disconnect()
        target.stop()
        topology.teardown(topo, veth)


def test_the_controller_is_an_rdma_one_on_srnic(nvme):
    dev, _, topo = nvme
    ctrl = nvme_rdma.controller()
    assert (ctrl / "transport").read_text().strip() == "rdma"
    address = (ctrl / "address").read_text()
    assert f"traddr={topo.a.addr}" in address, address
    assert (ctrl / "state").read_text().strip() == "live"
    size = int(Path(f"/sys/block/{dev.name}/size").read_text()) * 512
    assert size == NS_MIB << 20


@pytest.mark.parametrize("bs,rw", [("4k", "randwrite"), ("64k", "write"),
                                   ("128k", "randrw"), ("1m", "write")])
def test_fio_crc32c_verify(nvme, bs, rw):
    """Writes of each size with crc32c headers, read back and verified by
    fio; several in flight (iodepth 8), so registrations overlap."""
    out = nvme_rdma.fio(nvme[0], f"--bs={bs}", f"--rw={rw}", "--size=16M",
                        "--iodepth=8", "--verify=crc32c", "--do_verify=1",
                        "--verify_fatal=1")
    assert re.search(r"WRITE: bw=", out), out


def test_what_the_host_writes_is_what_the_target_file_holds(nvme):
    """A pattern written through the host is in the backing file, byte for
    byte (the target RDMA READ it from the host's registered pages), and
    reading it back through the host returns the same bytes (the target
    RDMA WRITEs into them)."""
    dev, backing, _ = nvme
    data = os.urandom(8 << 20)
    fd = os.open(dev, os.O_WRONLY)
    try:
        os.pwrite(fd, data, 4 << 20)
        os.fsync(fd)
    finally:
        os.close(fd)
    # nvmet's buffered file I/O: the page cache holds what it wrote.
    with open(backing, "rb") as f:
        f.seek(4 << 20)
        on_target = f.read(len(data))
    assert hashlib.sha256(on_target).digest() == hashlib.sha256(data).digest()

    harness.run("blockdev", "--flushbufs", str(dev))
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, len(data))
        assert os.preadv(fd, [buf], 4 << 20) == len(data)
        assert hashlib.sha256(buf).digest() == hashlib.sha256(data).digest()
    finally:
        os.close(fd)


def test_reconnect_after_the_port_comes_back(nvme):
    """The target's port goes away (the host sees its connection drop and
    tries to reconnect) and comes back: the controller is live again and
    I/O verifies."""
    dev = nvme[0]
    ctrl = nvme_rdma.controller()
    link = nvme_rdma.NVMET / "ports" / nvme_rdma.PORT_ID / "subsystems" / \
        nvme_rdma.NQN
    link.unlink()
    harness.wait_for(lambda: (ctrl / "state").read_text().strip() != "live",
                     timeout=60, what="the host to notice the port gone")
    time.sleep(2)
    link.symlink_to(nvme_rdma.NVMET / "subsystems" / nvme_rdma.NQN)
    harness.wait_for(lambda: (ctrl / "state").read_text().strip() == "live",
                     timeout=120, what="the controller live again")
    nvme_rdma.fio(dev, "--bs=64k", "--rw=randwrite", "--size=8M",
                  "--iodepth=4", "--verify=crc32c", "--do_verify=1",
                  "--verify_fatal=1")

