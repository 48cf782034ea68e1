# SPDX-License-Identifier: GPL-2.0
"""The srnic device: link add/delete/rename, the port following its netdev
(carrier, admin state, MTU, addresses as RoCE v2 GIDs), netdev removal and
rename and netns moves, module unload with live devices, bad `rdma link add`
input, and the provider binding whatever the device's name.
"""
import os
import re

import pytest

from harness import (SRNIC_ROOT, SYSFS_IB, AsyncWatch, ContextHolder, Veth,
                     devinfo_field,
                     eui64_from_mac, ib_devices, ibv_devinfo, ipv4_gid,
                     link_add, link_delete, module_loaded, port_gids,
                     rdma_devs, rdma_links, run, sysfs_read, wait_for,
                     engine_thread_pids)
from uverbs_raw import SRNIC_ABI_VERSION


def srnic_parents():
    return sorted(os.listdir(SRNIC_ROOT)) if os.path.isdir(SRNIC_ROOT) else []


def port_state(name):
    return rdma_links().get(name, {}).get("state")


def test_link_type_autoloads_module():
    """`rdma link add ... type srnic` loads srnic.ko by its link alias."""
    if module_loaded():
        run("rmmod", "srnic")
    assert not module_loaded()
    pair = Veth()
    try:
        link_add("auto0", pair.a)
        assert module_loaded()
        assert "auto0" in rdma_links()
        link_delete("auto0")
    finally:
        pair.close()


def readme_module_parameters():
    """README's table of module parameters: {name: default}."""
    with open(os.path.join(os.environ["SRNIC_REPO"], "README.md")) as f:
        text = f.read()
    section = text.split("### Module parameters", 1)[1].split("\n#", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| (\S+) \|", section, re.M))


def test_module_parameters_documented(srnic):
    """Every parameter of srnic.ko is in README's table, with the default
    a freshly loaded module shows, and the table names no other."""
    documented = readme_module_parameters()
    params = "/sys/module/srnic/parameters"
    actual = {}
    for name in os.listdir(params):
        with open(os.path.join(params, name)) as f:
            actual[name] = f.read().strip()
    assert sorted(actual) == sorted(documented)
    assert actual == documented


def test_device_shown_by_tools(srnic, veth):
    link_add("srnic0", veth.a)

    link = rdma_links()["srnic0"]
    assert link["netdev"] == veth.a
    assert link["state"] == "ACTIVE"
    assert "srnic0" in rdma_devs()
    assert "srnic0" in ib_devices()

    info = ibv_devinfo("srnic0", verbose=True)
    assert devinfo_field(info, "transport") == "InfiniBand (0)"
    assert devinfo_field(info, "link_layer") == "Ethernet"
    assert devinfo_field(info, "state") == "PORT_ACTIVE (4)"
    guid = eui64_from_mac(veth.mac(veth.a))
    assert devinfo_field(info, "node_guid") == guid
    assert devinfo_field(info, "sys_image_guid") == guid
    assert devinfo_field(info, "vendor_id") == "0xfffffe"
    # The firmware version names the ABI version (srnic-abi.h).
    assert devinfo_field(info, "fw_ver") == f"{SRNIC_ABI_VERSION}.0.0"
    assert devinfo_field(info, "max_msg_sz") == "0x80000000"
    # Honest limits: only what is implemented is claimed.
    for field in ("max_pd", "max_mr", "max_qp", "max_cq", "max_cqe",
                  "max_qp_wr", "max_sge", "max_ah", "max_srq", "max_srq_wr",
                  "max_srq_sge"):
        assert int(devinfo_field(info, field)) > 0, field

    # dev.parent lets rdma-core find the netdev.
    assert os.listdir(f"{SYSFS_IB}/srnic0/device/net") == [veth.a]
    assert sysfs_read(f"{SYSFS_IB}/srnic0/netdev") == veth.a


def test_provider_binds_any_name(srnic, veth):
    """A device named like nothing srnic-ish still opens with our provider."""
    pyverbs_device = pytest.importorskip("pyverbs.device")
    from pyverbs.pd import PD
    import verbs_enums as e

    run("ip", "addr", "add", "198.18.0.1/24", "dev", veth.a)
    link_add("anything", veth.a)
    assert "anything" in ib_devices()

    with pyverbs_device.Context(name="anything") as ctx:
        with open("/proc/self/maps") as maps:
            # libsrnic-rdmav<ABI>.so, ABI being libibverbs' private one.
            assert re.search(r"/libsrnic-rdmav[0-9]+\.so$", maps.read(), re.M)
        attr = ctx.query_device()
        assert attr.max_pd > 0
        assert attr.max_qp > 0 and attr.max_mr > 0
        ex = ctx.query_device_ex()
        assert ex.orig_attr.node_guid == attr.node_guid
        port = ctx.query_port(1)
        assert port.state == e.IBV_PORT_ACTIVE
        assert port.link_layer == e.IBV_LINK_LAYER_ETHERNET
        gids = [str(ctx.query_gid(1, i)) for i in range(port.gid_tbl_len)]
        assert ipv4_gid("198.18.0.1") in gids, gids
        pds = [PD(ctx) for _ in range(8)]
        for pd in pds:
            pd.close()


def test_link_delete_removes_everything(srnic, veth):
    parents = srnic_parents()
    link_add("srnic0", veth.a)
    assert len(srnic_parents()) == len(parents) + 1
    link_delete("srnic0")
    assert "srnic0" not in rdma_links()
    assert not os.path.exists(f"{SYSFS_IB}/srnic0")
    assert srnic_parents() == parents
    # The netdev can take a new device afterwards.
    link_add("srnic0", veth.a)
    assert "srnic0" in rdma_links()


def test_two_devices_in_one_namespace_name_accept_local(srnic, veth):
    """Two srnic devices of one namespace need accept_local on both
    netdevs (ib_core ARPs between two local addresses): the kernel log
    says so, naming the devices and the sysctls, when the second one is
    made; not once both netdevs accept local sources (issue 25 item 6)."""
    for end in (veth.a, veth.b):
        run("sysctl", "-qw", f"net.ipv4.conf.{end}.accept_local=0")
    run("dmesg", "-C")
    link_add("srnic0", veth.a)
    link_add("srnic1", veth.b)
    log = run("dmesg").stdout
    want = (re.escape(f"srnic: srnic1 ({veth.b}) and srnic0 ({veth.a}) "
                      "share network namespace ") + r"\d+" +
            re.escape(": connections between them need "
                      f"net.ipv4.conf.{veth.b}.accept_local=1 and "
                      f"net.ipv4.conf.{veth.a}.accept_local=1"))
    assert re.search(want, log), log
    link_delete("srnic1")
    for end in (veth.a, veth.b):
        run("sysctl", "-qw", f"net.ipv4.conf.{end}.accept_local=1")
    run("dmesg", "-C")
    link_add("srnic1", veth.b)
    assert "accept_local" not in run("dmesg").stdout


def test_device_rename(srnic, veth):
    link_add("srnic0", veth.a)
    run("rdma", "dev", "set", "srnic0", "name", "renamed0")
    assert "renamed0" in rdma_links() and "srnic0" not in rdma_links()
    assert "renamed0" in ib_devices()
    info = ibv_devinfo("renamed0")
    assert devinfo_field(info, "state") == "PORT_ACTIVE (4)"


def test_port_follows_carrier_and_admin_state(srnic, veth):
    link_add("srnic0", veth.a)
    watch = AsyncWatch("srnic0")
    try:
        # Peer down: va loses carrier.
        run("ip", "link", "set", veth.b, "down")
        wait_for(lambda: port_state("srnic0") == "DOWN", what="port DOWN")
        watch.wait_event("IBV_EVENT_PORT_ERR")
        assert devinfo_field(ibv_devinfo("srnic0"),
                             "state") == "PORT_DOWN (1)"

        run("ip", "link", "set", veth.b, "up")
        wait_for(lambda: port_state("srnic0") == "ACTIVE", what="port ACTIVE")
        watch.wait_event("IBV_EVENT_PORT_ACTIVE")

        # Our own netdev administratively down, then up.
        watch.lines.clear()
        run("ip", "link", "set", veth.a, "down")
        wait_for(lambda: port_state("srnic0") == "DOWN", what="port DOWN")
        watch.wait_event("IBV_EVENT_PORT_ERR")
        assert rdma_links()["srnic0"]["physical_state"] == "DISABLED"
        run("ip", "link", "set", veth.a, "up")
        wait_for(lambda: port_state("srnic0") == "ACTIVE", what="port ACTIVE")
        watch.wait_event("IBV_EVENT_PORT_ACTIVE")
    finally:
        watch.close()


@pytest.mark.parametrize("mtu,active", [(1500, "1024 (3)"), (9000, "4096 (5)"),
                                        (2200, "2048 (4)"), (600, "256 (1)")])
def test_active_mtu_follows_netdev(srnic, veth, mtu, active):
    link_add("srnic0", veth.a)
    run("ip", "link", "set", veth.a, "mtu", str(mtu))
    assert devinfo_field(ibv_devinfo("srnic0"), "active_mtu") == active
    assert devinfo_field(ibv_devinfo("srnic0"), "max_mtu") == "4096 (5)"


def test_gid_table_follows_addresses(srnic, veth):
    link_add("srnic0", veth.a)
    gid4 = ipv4_gid("198.18.0.1")
    assert gid4 not in [g for _, g, _ in port_gids("srnic0")]

    run("ip", "addr", "add", "198.18.0.1/24", "dev", veth.a)
    wait_for(lambda: gid4 in [g for _, g, _ in port_gids("srnic0")],
             what="IPv4 GID")
    types = {g: t for _, g, t in port_gids("srnic0")}
    assert types[gid4] == "RoCE v2"

    run("ip", "-6", "addr", "add", "fd00:5::1/64", "dev", veth.a, "nodad")
    gid6 = "fd00:0005:0000:0000:0000:0000:0000:0001"
    wait_for(lambda: gid6 in [g for _, g, _ in port_gids("srnic0")],
             what="IPv6 GID")

    run("ip", "addr", "del", "198.18.0.1/24", "dev", veth.a)
    wait_for(lambda: gid4 not in [g for _, g, _ in port_gids("srnic0")],
             what="IPv4 GID removal")
    run("ip", "-6", "addr", "del", "fd00:5::1/64", "dev", veth.a)
    wait_for(lambda: gid6 not in [g for _, g, _ in port_gids("srnic0")],
             what="IPv6 GID removal")


def test_netdev_removal_removes_device(srnic, veth):
    parents = srnic_parents()
    link_add("srnic0", veth.a)
    run("ip", "link", "del", veth.a)
    wait_for(lambda: "srnic0" not in rdma_links(), what="device removal")
    wait_for(lambda: srnic_parents() == parents, what="parent removal")


def test_netdev_move_to_netns_removes_device(srnic, veth):
    link_add("srnic0", veth.a)
    veth.move_to_netns(veth.a, "srnic-move")
    wait_for(lambda: "srnic0" not in rdma_links(), what="device removal")
    # A device can then be created on the netdev inside its namespace.
    link_add("srnic0", veth.a, netns="srnic-move")
    assert rdma_links(netns="srnic-move")["srnic0"]["netdev"] == veth.a


def test_netdev_rename_followed(srnic, veth):
    link_add("srnic0", veth.a)
    run("ip", "link", "set", veth.a, "down")
    run("ip", "link", "set", veth.a, "name", "svrenamed")
    veth.a = "svrenamed"
    run("ip", "link", "set", veth.a, "up")
    assert os.listdir(f"{SYSFS_IB}/srnic0/device/net") == ["svrenamed"]
    assert rdma_links()["srnic0"]["netdev"] == "svrenamed"


def test_bad_link_add_input(srnic, veth):
    links, parents = set(rdma_links()), srnic_parents()

    p = link_add("bad0", "no-such-netdev", check=False)
    assert p.returncode != 0 and "No such device" in p.stderr, p.stderr

    p = link_add("bad0", "lo", check=False)
    assert p.returncode != 0 and "Invalid argument" in p.stderr, p.stderr

    link_add("good0", veth.a)
    p = link_add("bad0", veth.a, check=False)
    assert p.returncode != 0 and "File exists" in p.stderr, p.stderr
    # A name already taken: ib_register_device() fails after the device
    # is whole, and its one teardown is srnic_dev_dealloc() (the error
    # path used to run it twice: list corruption, a kernel BUG).
    p = link_add("good0", veth.b, check=False)
    assert p.returncode != 0, p.stderr
    link_delete("good0")
    # Both netdevs take devices again: nothing of the failure lingers.
    link_add("again0", veth.b)
    link_delete("again0")

    assert set(rdma_links()) == links
    assert srnic_parents() == parents


def test_rmmod_with_live_devices(srnic):
    pairs = [Veth(), Veth()]
    try:
        link_add("live0", pairs[0].a)
        link_add("live1", pairs[1].b)
        run("ip", "addr", "add", "198.18.1.1/24", "dev", pairs[0].a)
        run("rmmod", "srnic")
        assert not module_loaded()
        assert not set(rdma_links()) & {"live0", "live1"}
        assert not os.path.exists(SRNIC_ROOT)
        run("modprobe", "srnic")
        link_add("live0", pairs[0].a)
        assert rdma_links()["live0"]["state"] == "ACTIVE"
    finally:
        for pair in pairs:
            pair.close()


def test_netdev_removal_with_device_open(srnic, veth):
    """Unregistration does not wait for processes holding the device."""
    link_add("busy0", veth.a)
    holder = ContextHolder("busy0")
    try:
        run("ip", "link", "del", veth.a, timeout=30)
        wait_for(lambda: "busy0" not in rdma_links(), what="device removal")
        holder.wait_fatal()
    finally:
        holder.close()


def test_rmmod_with_device_open(srnic, veth):
    link_add("busy0", veth.a)
    holder = ContextHolder("busy0")
    try:
        run("rmmod", "srnic", timeout=30)
        assert not module_loaded()
        holder.wait_fatal()
    finally:
        holder.close()
        run("modprobe", "srnic")


def test_demo_shows_two_active_devices_with_gids(srnic):
    """What `make run` prints: both devices ACTIVE with RoCE v2 GIDs, and
    data moved between them."""
    try:
        out = run("scripts/demo.sh", timeout=120).stdout
    finally:
        for name in ("srnic0", "srnic1"):
            link_delete(name, check=False)
        run("ip", "link", "del", "srnic-a", check=False)
    for name, netdev in (("srnic0", "srnic-a"), ("srnic1", "srnic-b")):
        assert f"link {name}/1 state ACTIVE physical_state LINK_UP " \
               f"netdev {netdev}" in out, out
    assert "::ffff:198.18.0.1, RoCE v2" in out
    assert "::ffff:198.18.0.2, RoCE v2" in out
    assert out.count("PORT_ACTIVE (4)") == 2
    # ... and moves data between them, checked by ibv_rc_pingpong -c.
    assert "13107200 bytes in" in out and "100 iters in" in out, out
    # Then the counters and the trace of that exchange (two devices of one
    # host: local delivery, no packets): 100 iterations, each a SEND and a
    # receive completing on each side, and the QPs' states and MRs.
    for name in ("srnic0", "srnic1"):
        # One line (iproute2 6.1) or one counter per line (6.14).
        assert re.search(rf"^link {name}/1\s+rx_packets \d+\s.*?"
                         rf"\btx_packets \d+", out, re.M | re.S), out
    counts = {ev: int(n) for n, ev in
              re.findall(r"^\s*(\d+) (srnic_\w+):$", out, re.M)}
    assert counts.get("srnic_cqe", 0) >= 400, counts
    assert counts.get("srnic_wqe_start", 0) >= 200, counts
    assert counts.get("srnic_qp_state", 0) >= 6, counts
    assert counts.get("srnic_mr_reg", 0) >= 2, counts
    first = out.split("== its trace: the first events", 1)[1]
    assert "srnic_qp_state: srnic0 qpn=" in first and \
        "RESET -> INIT" in first, first


def engine_threads():
    """Names of srnic's NIC engine threads."""
    return sorted(engine_thread_pids())


def cpus_allowed(pid):
    """The CPUs a task may run on, as /proc/PID/status lists them."""
    for line in sysfs_read(f"/proc/{pid}/status").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def nice_of(pid):
    """The nice value of a task: field 19 of /proc/PID/stat."""
    stat = sysfs_read(f"/proc/{pid}/stat")
    return int(stat[stat.rindex(")") + 2:].split()[16])


def test_engine_threads_live_with_the_devices(srnic, veth):
    """One engine thread per CPU, bound to it, shared by every device:
    started with the first device, stopped with the last, none while srnic
    has no device (kernel/srnic_engine.c)."""
    assert engine_threads() == []
    link_add("srnic0", veth.a)
    pids = engine_thread_pids()
    assert {name: cpus_allowed(pid) for name, pid in pids.items()} == \
        {f"srnic/{c}": str(c) for c in range(os.cpu_count())}
    link_add("srnic1", veth.b)
    assert engine_thread_pids() == pids
    link_delete("srnic0")
    assert engine_thread_pids() == pids
    link_delete("srnic1")
    assert engine_threads() == []


def test_engine_threads_run_at_engine_nice(srnic, veth):
    """The engines run ahead of the applications they serve (nice -10 by
    default, srnic.engine_nice; kernel/srnic_engine.c has why)."""
    with open("/sys/module/srnic/parameters/engine_nice") as f:
        assert int(f.read()) == -10
    link_add("srnic0", veth.a)
    pids = engine_thread_pids()
    assert len(pids) == os.cpu_count()
    assert {name: nice_of(pid) for name, pid in pids.items()} == \
        {name: -10 for name in pids}
    assert nice_of(os.getpid()) == 0
