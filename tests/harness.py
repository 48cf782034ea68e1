# SPDX-License-Identifier: GPL-2.0
"""Helpers for srnic's VM test suites: commands, veth pairs, devices, sysfs.

Every suite runs inside the VM (scripts/vm-run) as root, with srnic.ko
installed under /lib/modules/$(uname -r)/updates and the built provider
registered in /etc/libibverbs.d/srnic.driver.
"""
import contextlib
import json
import os
import re
import subprocess
import time

SYSFS_IB = "/sys/class/infiniband"
# The running kernel's (major, minor), for what the kernel's own RDMA drivers
# (rxe) do differently between releases.
KERNEL = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
SRNIC_ROOT = "/sys/devices/srnic"


def run(*cmd, check=True, timeout=60, netns=None):
    """Run a command, return CompletedProcess with text output.

    With check=True a non-zero exit raises AssertionError with the output.
    """
    argv = list(cmd)
    if netns:
        argv = ["ip", "netns", "exec", netns] + argv
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} exited {p.returncode}\n"
            f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def wait_for(predicate, timeout=10.0, interval=0.05, what="condition"):
    """Poll predicate() until it returns a truthy value; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@contextlib.contextmanager
def module_param(name, value, module="srnic"):
    """Set a writable module parameter for the with block, then restore
    it."""
    path = f"/sys/module/{module}/parameters/{name}"
    with open(path) as f:
        saved = f.read().strip()
    with open(path, "w") as f:
        f.write(str(value))
    try:
        yield
    finally:
        with open(path, "w") as f:
            f.write(saved)


@contextlib.contextmanager
def srnic_test_module():
    """srnic_test.ko, the suites' hooks into srnic.ko (kernel/test/
    srnic_test.c; vm-run installs it beside srnic.ko, nothing else does),
    loaded for the with block: /sys/kernel/debug/srnic_test/<device>/mr_test
    and the module parameter fatal_nak_delay_ms. Unloaded after, so that
    srnic.ko can be removed."""
    run("modprobe", "srnic_test")
    try:
        yield
    finally:
        run("rmmod", "srnic_test")


def module_loaded(name="srnic"):
    return os.path.isdir(f"/sys/module/{name}")


def rdma_links(netns=None):
    """{ibdev name: link dict} from `rdma -j link show` (in netns if given:
    a netdev shows only in its own namespace)."""
    out = run("rdma", "-j", "link", "show", netns=netns).stdout
    return {l["ifname"]: l for l in json.loads(out or "[]")}


def rdma_resources(kind, *where):
    """`rdma -j -dd resource show KIND WHERE...` (e.g. "dev", "srnic0" or
    "link", "srnic0/1"): one dict per object, the driver's fields (drv_NAME
    in rdma's JSON) by their names."""
    out = run("rdma", "-j", "-dd", "resource", "show", kind, *where).stdout
    return [{k.removeprefix("drv_"): v for k, v in r.items()}
            for r in json.loads(out or "[]")]


def rdma_devs():
    out = run("rdma", "-j", "dev", "show").stdout
    return {d["ifname"]: d for d in json.loads(out or "[]")}


def ib_devices():
    """Device names `ibv_devices` lists (only devices a provider bound)."""
    out = run("ibv_devices").stdout
    names = []
    for line in out.splitlines()[2:]:
        fields = line.split()
        if fields:
            names.append(fields[0])
    return names


def ibv_devinfo(name, verbose=False):
    args = ["ibv_devinfo", "-d", name] + (["-v"] if verbose else [])
    return run(*args).stdout


def devinfo_field(text, field):
    m = re.search(rf"^\s*{re.escape(field)}:\s*(.+?)\s*$", text, re.M)
    assert m, f"{field} not in ibv_devinfo output:\n{text}"
    return m.group(1)


def link_add(name, netdev, netns=None, check=True):
    return run("rdma", "link", "add", name, "type", "srnic", "netdev", netdev,
               check=check, netns=netns)


def link_delete(name, check=True):
    return run("rdma", "link", "delete", name, check=check)


def link_counters(end):
    """An RDMA device's `rdma statistic` counters (name -> value); end is a
    tests/topology.py End (the command runs in its netns) or the name of a
    device in init_net."""
    name = end if isinstance(end, str) else end.name
    argv = ("rdma", "statistic", "show", "link", f"{name}/1")
    out = run(*(argv if isinstance(end, str) else end.cmd(*argv))).stdout
    out = out.split()
    i = out.index(f"{name}/1") + 1
    return {out[j]: int(out[j + 1]) for j in range(i, len(out) - 1, 2)}


def rdma_user_counts():
    """{ibdev: {pd, cq, qp, mr, ctx}} as `rdma resource show` counts them,
    less the objects kernel consumers own (no "pid" in their entries): an
    srnic device is a kernel verbs provider, so ib_core's own clients hold
    objects on it from registration on (ib_mad's QP1, its PD and CQ)."""
    res = json.loads(run("rdma", "-j", "resource", "show").stdout or "[]")
    counts = {d["ifname"]: {k: d[k] for k in ("pd", "cq", "qp", "mr", "ctx")}
              for d in res}
    for kind in ("pd", "cq", "qp", "mr"):
        out = run("rdma", "-j", "resource", "show", kind).stdout
        for o in json.loads(out or "[]"):
            if o.get("ifname") in counts and "pid" not in o:
                counts[o["ifname"]][kind] -= 1
    return counts


# Two kernels on one wire (tests/peer.py): (this VM's device kind, the
# peer's), srnic against srnic, srnic against that kernel's rxe, rxe
# against srnic.
TWO_KERNEL_PAIRS = [("srnic", "srnic"), ("srnic", "rxe"), ("rxe", "srnic")]


def kernel_qps(name, qp_type=None):
    """The QPs kernel consumers (ULPs, ib_core's MAD layer) own on device
    name, of qp_type ("RC", ...) if given, as `rdma resource show qp` lists
    them: no pid, a comm of the owning module's name."""
    out = run("rdma", "-j", "resource", "show", "qp", "link",
              f"{name}/1").stdout
    return [qp for qp in json.loads(out or "[]") if "pid" not in qp and
            qp_type in (None, qp.get("type"))]


def tracefs():
    """The tracing directory (/sys/kernel/tracing), tracefs mounted there
    if it is not yet."""
    path = "/sys/kernel/tracing"
    if not os.path.isdir(f"{path}/events"):
        run("mount", "-t", "tracefs", "nodev", path)
    return path


def sysfs_read(path):
    with open(path) as f:
        return f.read().strip()


def device_switch_path(end, switch):
    """/sys/class/infiniband/DEV/<switch> of an srnic device (ecn,
    selective_repeat); end is a tests/topology.py End or a device name."""
    return f"/sys/class/infiniband/{getattr(end, 'name', end)}/{switch}"


def set_device_switch(end, switch, value):
    """Write value to a device's switch (OSError if refused)."""
    with open(device_switch_path(end, switch), "w") as f:
        f.write(f"{value}\n")


def engine_thread_pids():
    """{name: pid} of srnic's NIC engine threads (srnic/CPU, shared by
    every device)."""
    threads = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                comm = sysfs_read(f"/proc/{pid}/comm")
            except OSError:
                continue
            if re.fullmatch(r"srnic/\d+", comm):
                threads[comm] = int(pid)
    return threads


def engine_wakeups():
    """How often srnic's engine threads have been switched to, all of them
    together (the third field of /proc/PID/schedstat: the times a task was
    run on a CPU, each after a wake-up or a preemption)."""
    return sum(int(sysfs_read(f"/proc/{pid}/schedstat").split()[2])
               for pid in engine_thread_pids().values())


def port_gids(name):
    """[(index, gid, type)] of the non-zero GIDs of port 1."""
    base = f"{SYSFS_IB}/{name}/ports/1"
    gids = []
    for idx in sorted(int(i) for i in os.listdir(f"{base}/gids")):
        gid = sysfs_read(f"{base}/gids/{idx}")
        if gid == "0000:0000:0000:0000:0000:0000:0000:0000":
            continue
        try:
            gtype = sysfs_read(f"{base}/gid_attrs/types/{idx}")
        except OSError:
            gtype = None
        gids.append((idx, gid, gtype))
    return gids


def ipv4_gid(addr):
    """The RoCE GID text ib_core shows for an IPv4 address."""
    a, b, c, d = (int(x) for x in addr.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def eui64_from_mac(mac):
    """node_guid text (xxxx:xxxx:xxxx:xxxx) derived from a MAC address."""
    b = [int(x, 16) for x in mac.split(":")]
    g = [b[0] ^ 2, b[1], b[2], 0xff, 0xfe, b[3], b[4], b[5]]
    return ":".join(f"{g[i]:02x}{g[i + 1]:02x}" for i in range(0, 8, 2))


class Veth:
    """A veth pair a<->b, both up; deleted (with its netns) on close().

    Its MTU is the kernel's default (1500: RoCE path MTU 1024) unless
    SRNIC_VETH_MTU says otherwise (the benchmark uses 9000: 4096)."""

    counter = 0

    def __init__(self, up=True):
        Veth.counter += 1
        n = Veth.counter
        self.a = f"sva{n}"
        self.b = f"svb{n}"
        self.netns = []
        mtu = os.environ.get("SRNIC_VETH_MTU")
        mtu_args = ("mtu", mtu) if mtu else ()
        run("ip", "link", "add", self.a, *mtu_args, "type", "veth", "peer",
            "name", self.b, *mtu_args)
        if up:
            run("ip", "link", "set", self.a, "up")
            run("ip", "link", "set", self.b, "up")

    def mac(self, ifname):
        return sysfs_read(f"/sys/class/net/{ifname}/address")

    def move_to_netns(self, ifname, netns):
        run("ip", "netns", "add", netns)
        self.netns.append(netns)
        run("ip", "link", "set", ifname, "netns", netns)
        run("ip", "link", "set", ifname, "up", netns=netns)

    def close(self):
        run("ip", "link", "del", self.a, check=False)
        run("ip", "link", "del", self.b, check=False)
        for ns in self.netns:
            run("ip", "netns", "del", ns, check=False)


def reset_stack():
    """Back to the stack a VM boots with (scripts/vm-guest-init.sh), for the
    next suite in the same VM (scripts/run-vm-suites.sh runs several per
    boot): every network namespace and veth gone (with the devices on
    them), every RDMA link deleted, srnic and rdma_rxe unloaded (their
    module parameters back to defaults). The kernel ULPs' modules, which a
    suite unloads itself where it can, stay."""
    run("ip", "-all", "netns", "delete", check=False, timeout=120)
    out = run("ip", "-o", "link", "show", "type", "veth", check=False).stdout
    for line in out.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        run("ip", "link", "del", name, check=False, timeout=120)
    for name in rdma_links():
        run("rdma", "link", "delete", name, check=False, timeout=120)
    for mod in ("srnic", "rdma_rxe"):
        if module_loaded(mod):
            run("modprobe", "-r", mod, check=False, timeout=120)


class AsyncWatch:
    """ibv_asyncwatch on one device, collecting the events it prints."""

    def __init__(self, name):
        self.proc = subprocess.Popen(["stdbuf", "-oL", "ibv_asyncwatch",
                                      "-d", name],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.lines = []
        # The tool prints a banner once it has opened the device.
        wait_for(lambda: self._read() or self.lines, timeout=15,
                 what="ibv_asyncwatch to start")

    def _read(self):
        try:
            chunk = os.read(self.proc.stdout.fileno(), 65536)
        except BlockingIOError:
            return False
        self.lines.extend(chunk.decode(errors="replace").splitlines())
        return False

    def wait_event(self, event, timeout=10):
        def seen():
            self._read()
            return any(event in l for l in self.lines)
        wait_for(seen, timeout=timeout, what=f"async event {event}")

    def close(self):
        self.proc.kill()
        self.proc.wait()


HOLDER_SCRIPT = r"""
import sys
from pyverbs.device import Context
from pyverbs.pd import PD
import os, sys  # noqa: E401
sys.path.insert(0, os.path.join(os.environ["SRNIC_REPO"], "tests"))
import verbs_enums as e
ctx = Context(name=sys.argv[1])
pd = PD(ctx)
print("ready", flush=True)
while True:
    event = ctx.get_async_event()
    kind = event.event_type
    event.ack()
    if kind == e.IBV_EVENT_DEVICE_FATAL:
        print("DEVICE_FATAL", flush=True)
        break
"""


class ContextHolder:
    """A process that keeps a device open (a context and a PD) and reports
    IBV_EVENT_DEVICE_FATAL, which uverbs sends when the device goes away
    under it."""

    def __init__(self, name):
        self.proc = subprocess.Popen(["/usr/bin/python3", "-c", HOLDER_SCRIPT,
                                      name], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", line + self.proc.stdout.read()

    def wait_fatal(self, timeout=15):
        out, _ = self.proc.communicate(timeout=timeout)
        assert "DEVICE_FATAL" in out, out
        assert self.proc.returncode == 0, out

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
