# SPDX-License-Identifier: GPL-2.0
"""Memory registration: reg/dereg through the provider with every access
combination, the errors of invalid and unsupported requests, keys (unique,
never index 0, changing on re-registration), many and large MRs, the
cleanup of a killed process's MRs, and the reported limits.
"""
import ctypes
import errno
import itertools
import json
import subprocess
import sys

import pytest

from harness import link_add, run, wait_for

pyverbs_device = pytest.importorskip("pyverbs.device")
from pyverbs.mem_alloc import free, posix_memalign  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
import pyverbs.enums as e  # noqa: E402

LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
RA = e.IBV_ACCESS_REMOTE_ATOMIC
PAGE = 4096
MAX_MR_SIZE = 1 << 39   # SRNIC_MAX_MR_SIZE


def resource_mrs(dev):
    """The MRs `rdma resource show mr` lists for dev (keys as integers)."""
    out = run("rdma", "-j", "resource", "show", "mr").stdout
    mrs = [m for m in json.loads(out or "[]") if m.get("ifname") == dev]
    for m in mrs:
        for k in ("lkey", "rkey"):
            if isinstance(m.get(k), str):
                m[k] = int(m[k], 16)
    return mrs


def expect_errno(code, *args, **kwargs):
    with pytest.raises(PyverbsRDMAError) as info:
        MR(*args, **kwargs).close()
    assert info.value.error_code == code, str(info.value)


@pytest.fixture
def dev(srnic, veth):
    link_add("mr0", veth.a)
    yield "mr0"
    # Every MR of every test is gone once its objects are closed.
    assert resource_mrs("mr0") == []


@pytest.fixture
def pd(dev):
    with pyverbs_device.Context(name=dev) as ctx:
        with PD(ctx) as pd:
            yield pd


def all_access_combinations():
    flags = (LW, RW, RR, RA)
    for n in range(len(flags) + 1):
        for combo in itertools.combinations(flags, n):
            yield sum(combo)


@pytest.mark.parametrize("access", list(all_access_combinations()))
def test_reg_dereg_each_access_combination(dev, pd, access):
    """Remote write or atomic without local write is invalid (EINVAL, as
    rdma-core's test_reg_mr_bad_flags expects); everything else registers."""
    if access & (RW | RA) and not access & LW:
        expect_errno(errno.EINVAL, pd, PAGE, access)
        assert resource_mrs(dev) == []
        return
    mr = MR(pd, 3 * PAGE, access)
    try:
        assert mr.lkey == mr.rkey
        assert mr.lkey >> 8 != 0, "index 0 is never used"
        mrs = resource_mrs(dev)
        assert len(mrs) == 1
        assert mrs[0]["lkey"] == mr.lkey and mrs[0]["mrlen"] == 3 * PAGE
    finally:
        mr.close()
    assert resource_mrs(dev) == []


def test_hint_access_flags_are_accepted(pd):
    """Relaxed ordering (optional) and HUGETLB (meaningful for ODP only)
    are hints srnic ignores."""
    MR(pd, PAGE, LW | e.IBV_ACCESS_RELAXED_ORDERING).close()
    buf = posix_memalign(PAGE, PAGE)
    try:
        MR(pd, PAGE, LW | e.IBV_ACCESS_HUGETLB, address=buf).close()
    finally:
        free(buf)


@pytest.mark.parametrize("access,code", [
    (LW | e.IBV_ACCESS_MW_BIND, errno.EOPNOTSUPP),    # no memory windows
    (LW | e.IBV_ACCESS_ZERO_BASED, errno.EOPNOTSUPP),
    # ib_core refuses ODP before the driver, as the device has no ODP cap.
    (LW | e.IBV_ACCESS_ON_DEMAND, errno.EINVAL),
])
def test_unsupported_access_flags(dev, pd, access, code):
    expect_errno(code, pd, PAGE, access)


def test_zero_length_is_invalid(pd):
    expect_errno(errno.EINVAL, pd, 0, LW)


def test_wrapping_range_is_invalid(pd):
    expect_errno(errno.EINVAL, pd, 2 * PAGE, LW, address=(1 << 64) - PAGE)


def test_longer_than_max_mr_size_is_invalid(pd):
    buf = posix_memalign(PAGE, PAGE)
    try:
        expect_errno(errno.EINVAL, pd, MAX_MR_SIZE + PAGE, LW, address=buf)
    finally:
        free(buf)


def test_unmapped_memory_is_refused(pd):
    expect_errno(errno.EFAULT, pd, PAGE, LW, address=PAGE)


def test_read_only_memory(pd):
    """Read-only pages register for local read only: pinning them for
    writing fails."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    prot_read, map_private_anon = 1, 0x02 | 0x20
    addr = libc.mmap(None, 4 * PAGE, prot_read, map_private_anon, -1, 0)
    assert addr not in (None, ctypes.c_void_p(-1).value)
    try:
        MR(pd, 4 * PAGE, 0, address=addr).close()
        expect_errno(errno.EFAULT, pd, 4 * PAGE, LW, address=addr)
    finally:
        libc.munmap(ctypes.c_void_p(addr), ctypes.c_size_t(4 * PAGE))


def test_unaligned_buffer(dev, pd):
    """A range starting and ending inside pages covers the pages it
    touches."""
    buf = posix_memalign(4 * PAGE, PAGE)
    try:
        mr = MR(pd, 2 * PAGE + 1, LW | RR, address=buf + PAGE - 100)
        assert resource_mrs(dev)[0]["mrlen"] == 2 * PAGE + 1
        mr.close()
    finally:
        free(buf)


def test_keys_change_on_reregistration_of_one_buffer(pd):
    buf = posix_memalign(PAGE, PAGE)
    keys = []
    try:
        for _ in range(300):
            mr = MR(pd, PAGE, LW, address=buf)
            keys.append(mr.lkey)
            mr.close()
    finally:
        free(buf)
    assert len(set(keys)) == len(keys)
    assert all(k >> 8 for k in keys)


def test_many_mrs(dev, pd):
    mrs = [MR(pd, PAGE, LW | RW | RR) for _ in range(1000)]
    try:
        keys = {mr.lkey for mr in mrs}
        assert len(keys) == len(mrs)
        assert len(resource_mrs(dev)) == len(mrs)
    finally:
        for mr in mrs:
            mr.close()
    assert resource_mrs(dev) == []


def test_large_mr(dev, pd):
    size = 64 << 20
    mr = MR(pd, size, LW | RW | RR)
    try:
        assert resource_mrs(dev)[0]["mrlen"] == size
    finally:
        mr.close()


def test_dereg_while_pd_in_use(dev, pd):
    """Deregistering one MR leaves the PD and its other MRs working."""
    keep = MR(pd, PAGE, LW)
    gone = MR(pd, PAGE, LW)
    gone_key = gone.lkey
    gone.close()
    mrs = resource_mrs(dev)
    assert [m["lkey"] for m in mrs] == [keep.lkey]
    again = MR(pd, PAGE, LW)
    assert again.lkey not in (keep.lkey, gone_key)
    again.close()
    keep.close()


def test_mrs_of_two_pds(dev):
    with pyverbs_device.Context(name=dev) as ctx:
        with PD(ctx) as pd1, PD(ctx) as pd2:
            a = MR(pd1, PAGE, LW)
            b = MR(pd2, PAGE, LW)
            pdns = {m["lkey"]: m["pdn"] for m in resource_mrs(dev)}
            assert pdns[a.lkey] != pdns[b.lkey]
            a.close()
            b.close()


KILLED_SCRIPT = r"""
import sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
import pyverbs.enums as e
ctx = Context(name=sys.argv[1])
pd = PD(ctx)
mrs = [MR(pd, 1 << 20, e.IBV_ACCESS_LOCAL_WRITE) for _ in range(20)]
print("ready", flush=True)
sys.stdin.read()
"""


def test_killed_process_mrs_are_released(dev):
    proc = subprocess.Popen(["/usr/bin/python3", "-c", KILLED_SCRIPT, dev],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert len(resource_mrs(dev)) == 20
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: resource_mrs(dev) == [], what="MRs released")


def test_device_limits(dev):
    with pyverbs_device.Context(name=dev) as ctx:
        attr = ctx.query_device()
    assert attr.max_mr > 1000
    assert attr.max_mr_size == MAX_MR_SIZE
    assert attr.page_size_cap & PAGE
