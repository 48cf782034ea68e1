# SPDX-License-Identifier: GPL-2.0
# srnic-vm-run: --timeout 600 --smp 2
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

The host has one polled I/O queue beside its interrupt-driven ones, so the
kernel CQs on srnic0 come in every poll context ib_core has: the host's
IB_POLL_DIRECT CQ (polled by io_uring's hipri I/O) and its shared
IB_POLL_SOFTIRQ CQs from ib_cq_pool, the target's shared IB_POLL_WORKQUEUE
CQs, and the MAD layer's IB_POLL_UNBOUND_WORKQUEUE CQ under the rdma_cm's
QP1. Every disconnect drains the QPs with ib_drain_qp().
"""
import hashlib
import ipaddress
import json
import mmap
import os
import re
import time
from pathlib import Path

import pytest

import harness
import nvme_rdma
import topology

# A ULP that stops answering leaves its tools waiting: a test ends in 3
# minutes (20 times what it takes here), the suite's VM in 10.
pytestmark = pytest.mark.timeout(180)

NS_MIB = 64


CQ_ALLOC = re.compile(r"cq_alloc: cq\.id=(\d+) nr_cqe=\d+ "
                      r"comp_vector=(\d+) poll_ctx=(\w+)")
CQ_SCHEDULE = re.compile(r"\[(\d+)\].*cq_schedule: cq\.id=(\d+)")


def trace_event(name, on):
    """Turn ib_core's tracepoint rdma_core:name on or off."""
    Path(f"{harness.tracefs()}/events/rdma_core/{name}/enable").write_text(
        "1" if on else "0")


def trace_take():
    """The trace buffer's lines, which it then forgets."""
    trace = Path(harness.tracefs()) / "trace"
    lines = trace.read_text().splitlines()
    trace.write_text("")
    return lines


@pytest.fixture(scope="module")
def nvme(tmp_path_factory):
    """(block device, backing file, topology): srnic0 on one-device, an
    nvmet-rdma target on its address, and nvme-rdma connected to it. The
    kernel CQs the ULPs allocate are traced (rdma_core:cq_alloc) for
    test_target_events_come_on_their_vectors_cpu()."""
    trace_event("cq_alloc", True)
    trace_take()
    topo, veth = topology.build("one-device", "srnic")
    backing = nvme_rdma.make_backing_file(
        tmp_path_factory.mktemp("nvmet") / "ns1.img", NS_MIB << 20)
    target = nvme_rdma.Target(topo.a.addr, backing)
    try:
        target.start()
        dev = nvme_rdma.connect(topo.a.addr, poll_queues=1)
        yield dev, backing, topo
    finally:
        trace_event("cq_alloc", False)
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


# make check's other platforms: the mixed line, reads and writes verified.
@pytest.mark.platform_subset(rw=["randrw"])
@pytest.mark.parametrize("bs,rw", [("4k", "randwrite"), ("64k", "write"),
                                   ("128k", "randrw"), ("1m", "write")])
def test_fio_crc32c_verify(nvme, bs, rw):
    """Writes of each size with crc32c headers, read back and verified by
    fio; several in flight (iodepth 8), so registrations overlap."""
    nvme_rdma.verify_fio(nvme[0], bs, rw)


def kernel_cqs(name):
    """srnic device name's kernel CQs, as `rdma resource show cq` lists them
    (poll-ctx is there for kernel CQs only)."""
    out = harness.run("rdma", "-j", "resource", "show", "cq", "dev",
                      name).stdout
    return [cq for cq in json.loads(out or "[]") if "poll-ctx" in cq]


def test_kernel_cqs_in_every_poll_context_and_shared(nvme):
    cqs = kernel_cqs(nvme[2].a.name)
    contexts = {cq["poll-ctx"] for cq in cqs}
    assert {"DIRECT", "SOFTIRQ", "WORKQUEUE",
            "UNBOUND_WORKQUEUE"} <= contexts, cqs
    # ib_cq_pool's CQs carry several queues' QPs: the host's admin and I/O
    # queues and the target's, more QPs than completion vectors.
    assert any(cq["users"] >= 2 for cq in cqs
               if cq["poll-ctx"] in ("SOFTIRQ", "WORKQUEUE")), cqs


def test_io_wakes_no_engine_thread(nvme):
    """Kernel consumers' posts run the QP's work in the poster's context
    (srnic_engine_task_run_atomic(), kernel/srnic_engine.c): the host's
    command, the target's data and response, the receives both repost, all
    between two QPs of one device, switch to no engine thread. Before, each
    of them woke one: several per I/O."""
    dev = nvme[0]
    ios = 4096
    before = harness.engine_wakeups()
    out = nvme_rdma.fio(dev, "--rw=randread", "--bs=4k",
                        f"--size={ios * 4}k", "--iodepth=8")
    woken = harness.engine_wakeups() - before
    assert "READ: bw=" in out, out
    assert woken < ios / 20, f"{woken} engine wake-ups for {ios} I/Os"


def test_target_events_come_on_their_vectors_cpu(nvme):
    """The target's CQs (nvmet-rdma's IB_POLL_WORKQUEUE CQs from ib_cq_pool,
    one per completion vector) get their completion events on their
    vector's CPU, the vector-th possible CPU, as behind a NIC's MSI-X
    vector (kernel/srnic_cq.c, srnic_cq_event()), whichever CPU posted the
    CQE: fio runs on each CPU in turn, and nvmet gives the host's queues
    vectors in the order it accepts them (queue 1, the first CPU's, has
    vector 1), so each CQ's CQEs come from a CPU other than its vector's.
    The poller's work item runs where the event is raised: the target's
    work gets the CPUs it chose rather than the submitter's."""
    dev, _, topo = nvme
    cqs = {}
    for line in trace_take():
        m = CQ_ALLOC.search(line)
        if m and m.group(3) == "WORKQUEUE":
            cqs[m.group(1)] = int(m.group(2))
    assert cqs, "no IB_POLL_WORKQUEUE CQ allocated by the target"
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: every vector's CPU is the poster's (this suite's "
                    "srnic-vm-run line boots two)")
    possible = harness.sysfs_read("/sys/devices/system/cpu/possible")
    assert possible == f"0-{len(cpus) - 1}", (possible, cpus)
    trace_event("cq_schedule", True)
    try:
        for cpu in cpus:
            nvme_rdma.fio(dev, "--rw=randread", "--bs=4k", "--size=2M",
                          "--iodepth=4", f"--cpus_allowed={cpu}")
    finally:
        trace_event("cq_schedule", False)
    seen = {}
    for line in trace_take():
        m = CQ_SCHEDULE.search(line)
        if m and m.group(2) in cqs:
            seen.setdefault(m.group(2), set()).add(int(m.group(1)))
    assert seen, f"no event on the target's CQs {cqs}"
    for cq, on in seen.items():
        assert on == {cqs[cq]}, (
            f"CQ {cq} (vector {cqs[cq]}): events on CPUs {sorted(on)}")


def test_polled_io_completes_through_the_direct_cq(nvme):
    """io_uring's hipri I/O goes to the polled queue, whose completions the
    submitter reaps with ib_process_cq_direct(): crc32c-verified."""
    dev = nvme[0]
    head = Path(f"/sys/block/{dev.name}/queue/io_poll")
    assert head.read_text().strip() == "1", "no polled queue on " + dev.name
    nvme_rdma.verify_fio(dev, "16k", "randwrite", "--hipri=1", size="8M",
                         ioengine="io_uring")


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



NQN_IPV6 = nvme_rdma.NQN + "-ipv6"
NQN_TWO_DEVICES = nvme_rdma.NQN + "-two-devices"


def test_a_second_subsystem_over_ipv6(nvme, tmp_path):
    """A second subsystem on a port at the netdev's IPv6 address: the
    kernel rdma_cm's IPv6 path on both sides, I/O verified."""
    dev, _, topo = nvme
    net = ipaddress.ip_address(topo.a.addr).packed
    addr = f"fd00:{net[0]:x}:{net[1]:x}:{net[2]:x}::1"
    harness.run("ip", "-6", "addr", "add", f"{addr}/64", "dev",
                topo.a.netdev, "nodad")
    harness.wait_for(lambda: any(
        ipaddress.ip_address(g) == ipaddress.ip_address(addr)
        for _, g, t in harness.port_gids(topo.a.name) if t == "RoCE v2"),
        timeout=20, what=f"the RoCE v2 GID of {addr}")
    backing = nvme_rdma.make_backing_file(tmp_path / "ns6.img", 16 << 20)
    target = nvme_rdma.Target(addr, backing, nqn=NQN_IPV6, port_id="2")
    try:
        target.start()
        dev6 = nvme_rdma.connect(addr, nqn=NQN_IPV6)
        assert dev6 != dev
        ctrl = nvme_rdma.controller(NQN_IPV6)
        assert f"traddr={addr}" in (ctrl / "address").read_text()
        nvme_rdma.verify_fio(dev6, "64k", "randwrite", size="8M")
        nvme_rdma.direct_write_lands_in(dev6, backing, 1 << 20, 4 << 20)
    finally:
        nvme_rdma.disconnect(NQN_IPV6, unload=False)
        target.stop(unload=False)
        harness.run("ip", "-6", "addr", "del", f"{addr}/64", "dev",
                    topo.a.netdev, check=False)


@pytest.fixture(scope="module")
def nvme_two_devices(tmp_path_factory, nvme):
    """The target on srnic2, the host on srnic3, both in init_net (the
    veth-one-netns topology), beside the one-device connection on srnic0."""
    dev1, _, _ = nvme
    topo, veth = topology.build("veth-one-netns", "srnic",
                                names=("srnic2", "srnic3"))
    backing = nvme_rdma.make_backing_file(
        tmp_path_factory.mktemp("nvmet2") / "ns2.img", 16 << 20)
    target = nvme_rdma.Target(topo.a.addr, backing, nqn=NQN_TWO_DEVICES,
                              port_id="3")
    try:
        target.start()
        dev = nvme_rdma.connect(topo.a.addr, nqn=NQN_TWO_DEVICES,
                                host_addr=topo.b.addr)
        assert dev != dev1
        yield dev, backing, topo
    finally:
        nvme_rdma.disconnect(NQN_TWO_DEVICES, unload=False)
        target.stop(unload=False)
        topology.teardown(topo, veth)



def test_two_devices_host_on_one_target_on_the_other(nvme_two_devices):
    dev, backing, topo = nvme_two_devices
    address = (nvme_rdma.controller(NQN_TWO_DEVICES) / "address").read_text()
    assert f"traddr={topo.a.addr}" in address, address
    assert f"host_traddr={topo.b.addr}" in address, address
    # One RC QP per queue (admin and I/O) on each end's own device: the
    # host's on srnic3, the target's on srnic2 (rdma_cm owns them all).
    host = harness.kernel_qps(topo.b.name, "RC")
    target = harness.kernel_qps(topo.a.name, "RC")
    assert len(host) >= 2 and len(host) == len(target), (host, target)
    nvme_rdma.verify_fio(dev, "128k", "randrw", size="8M")
    nvme_rdma.direct_write_lands_in(dev, backing, 2 << 20, 4 << 20)
