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
import os
import select
import subprocess
import zlib

import pytest

from harness import link_add, run, srnic_test_module, wait_for

pyverbs_device = pytest.importorskip("pyverbs.device")
from pyverbs.mem_alloc import free, posix_memalign  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.pyverbs_error import PyverbsRDMAError  # noqa: E402
import verbs_enums as e  # noqa: E402

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
    (LW | e.IBV_ACCESS_ZERO_BASED, errno.EOPNOTSUPP),
    # IBV_ACCESS_ON_DEMAND is supported: tests/test_odp.py.
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
import os, sys  # noqa: E401
sys.path.insert(0, os.path.join(os.environ["SRNIC_REPO"], "tests"))
import verbs_enums as e
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


# ---- The lookup and copy API of the data path, through the test hook ----
#
# srnic_mr_lookup() and the copy helpers have no user before QPs exist;
# debugfs srnic_test/<device>/mr_test, of the test-only module srnic_test.ko
# (kernel/test/srnic_test.c), drives them against MRs this process
# registers.

IB_LOCAL_WRITE, IB_REMOTE_WRITE, IB_REMOTE_READ = 1, 2, 4


class Hook:
    def __init__(self, dev):
        if not os.path.ismount("/sys/kernel/debug"):
            run("mount", "-t", "debugfs", "none", "/sys/kernel/debug")
        self.path = f"/sys/kernel/debug/srnic_test/{dev}/mr_test"

    def __call__(self, text):
        """Run one command; return 0 or the errno it failed with."""
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
            return 0
        except OSError as ex:
            return ex.errno
        finally:
            os.close(fd)

    def crc(self):
        with open(self.path) as f:
            return int(f.read(), 16)


@pytest.fixture
def hook(dev):
    with srnic_test_module():
        yield Hook(dev)


def pdn_of(dev, mr):
    return [m["pdn"] for m in resource_mrs(dev) if m["lkey"] == mr.lkey][0]


def pattern(seed, length):
    return bytes((seed + i + (i >> 12)) & 0xff for i in range(length))


def test_product_module_has_no_test_hooks(dev):
    """srnic.ko itself offers no test hook: no mr_test file in its debugfs
    directory, no test parameter; they come with srnic_test.ko only, whose
    directory appears and goes with it."""
    if not os.path.ismount("/sys/kernel/debug"):
        run("mount", "-t", "debugfs", "none", "/sys/kernel/debug")
    link = os.path.basename(os.readlink(f"/sys/class/infiniband/{dev}/device"))
    assert os.path.isdir(f"/sys/kernel/debug/srnic/{link}")
    assert not os.path.exists(f"/sys/kernel/debug/srnic/{link}/mr_test")
    params = os.listdir("/sys/module/srnic/parameters")
    assert not [p for p in params if "test" in p or "hook" in p], params
    assert not os.path.exists(Hook(dev).path)
    with srnic_test_module():
        assert os.path.exists(Hook(dev).path)
    assert not os.path.exists(Hook(dev).path)


def test_lookup_checks_key_pd_access_bounds(dev, pd, hook):
    buf = posix_memalign(4 * PAGE, PAGE)
    addr, length = buf + 100, 3 * PAGE
    mr = MR(pd, length, LW | RR, address=addr)
    key, pdn = mr.lkey, pdn_of(dev, mr)
    end = addr + length
    try:
        def lookup(kind="l", key=key, pdn=pdn, access=0, iova=addr,
                   length=length):
            return hook(f"lookup {kind} {key:x} {pdn} {access} {iova:x} "
                        f"{length}")

        assert lookup() == 0
        assert lookup(kind="r", access=IB_REMOTE_READ) == 0
        assert lookup(access=IB_LOCAL_WRITE | IB_REMOTE_READ) == 0
        assert lookup(iova=end - 1, length=1) == 0
        assert lookup(iova=end, length=0) == 0
        # Keys: another key byte (stale key), another index, index 0.
        assert lookup(key=key ^ 0x01) == errno.ENOENT
        assert lookup(key=key ^ 0x80) == errno.ENOENT
        assert lookup(key=key + 0x100) == errno.ENOENT
        assert lookup(key=key & 0xff) == errno.ENOENT
        # PD, access
        assert lookup(pdn=pdn + 1) == errno.EPERM
        assert lookup(access=IB_REMOTE_WRITE) == errno.EACCES
        # Bounds, including arithmetic that would wrap.
        assert lookup(iova=addr - 1) == errno.ERANGE
        assert lookup(length=length + 1) == errno.ERANGE
        assert lookup(iova=end, length=1) == errno.ERANGE
        assert lookup(iova=addr + 1, length=(1 << 64) - 1) == errno.ERANGE
        assert lookup(iova=(1 << 64) - 1, length=2) == errno.ERANGE
        assert lookup(iova=0, length=0) == errno.ERANGE
    finally:
        mr.close()
        free(buf)
    # A deregistered MR's key misses.
    assert hook(f"lookup l {key:x} {pdn} 0 {addr:x} 1") == errno.ENOENT


def test_rkey_of_local_only_mr_misses(dev, pd, hook):
    mr = MR(pd, PAGE, LW)
    try:
        assert hook(f"lookup l {mr.lkey:x} {pdn_of(dev, mr)} 0 "
                    f"{mr.buf:x} {PAGE}") == 0
        assert hook(f"lookup r {mr.rkey:x} {pdn_of(dev, mr)} 0 "
                    f"{mr.buf:x} {PAGE}") == errno.ENOENT
    finally:
        mr.close()


def test_copy_to_and_from_cross_pages(dev, pd, hook):
    """A write spanning three pages of an MR that starts mid-page lands at
    the right addresses and nowhere else; reading it back agrees."""
    buf = posix_memalign(8 * PAGE, PAGE)
    addr, length = buf + 100, 5 * PAGE
    mr = MR(pd, length, LW | RW | RR, address=addr)
    pdn = pdn_of(dev, mr)
    try:
        mr.write(b"\xaa" * length, length)
        off, n = PAGE - 10, 2 * PAGE + 50
        expected = pattern(7, n)
        assert hook(f"fill {mr.rkey:x} {pdn} {addr + off:x} {n} 7") == 0
        data = mr.read(length, 0)
        assert data[:off] == b"\xaa" * off
        assert data[off:off + n] == expected
        assert data[off + n:] == b"\xaa" * (length - off - n)

        assert hook(f"crc {mr.rkey:x} {pdn} {addr + off:x} {n}") == 0
        assert hook.crc() == zlib.crc32(expected)
        assert hook(f"crc {mr.rkey:x} {pdn} {addr:x} {length}") == 0
        assert hook.crc() == zlib.crc32(data)
        # Out of bounds: refused at lookup, nothing written.
        assert hook(f"fill {mr.rkey:x} {pdn} {addr + 1:x} {length} 1") \
            == errno.ERANGE
        assert mr.read(length, 0) == data
    finally:
        mr.close()
        free(buf)


ICRC_ROUTINES = ("crc32_le", "fold", "crypto")


def test_payload_icrc_routines_agree_with_zlib(dev, pd, hook):
    """Every payload ICRC routine the module has (kernel/srnic_payload.c)
    gives zlib's CRC-32 at every alignment, for every length around the
    fold's threshold and tail and for page-sized ones."""
    size = 4 * PAGE
    mr = MR(pd, size, LW | RW | RR)
    pdn = pdn_of(dev, mr)
    try:
        data = os.urandom(size)
        mr.write(data, size)
        lengths = list(range(140)) + [255, 256, 257, 1000, PAGE - 3, PAGE,
                                      PAGE + 3, 3 * PAGE + 5]
        checked = []
        for routine in ICRC_ROUTINES:
            code = hook(f"crc {mr.rkey:x} {pdn} {mr.buf:x} 100 {routine}")
            if routine == "crypto" and code == errno.ENODEV:
                continue  # not chosen at load: the crypto API's is slower
            assert code == 0, routine
            for off, n in itertools.product(range(8), lengths):
                addr = mr.buf + off
                assert hook(f"crc {mr.rkey:x} {pdn} {addr:x} {n} {routine}") \
                    == 0
                assert hook.crc() == zlib.crc32(data[off:off + n]), \
                    (routine, off, n)
            checked.append(routine)
        assert checked[:2] == ["crc32_le", "fold"]
        assert hook(f"crc {mr.rkey:x} {pdn} {mr.buf:x} 100 crc16") \
            == errno.EINVAL
    finally:
        mr.close()


def test_large_mr_copy(dev, pd, hook):
    size = 64 << 20
    mr = MR(pd, size, LW | RW | RR)
    pdn = pdn_of(dev, mr)
    try:
        tail = size - 3 * PAGE - 7
        assert hook(f"fill {mr.rkey:x} {pdn} {mr.buf + tail:x} "
                    f"{size - tail} 3") == 0
        assert mr.read(size - tail, tail) == pattern(3, size - tail)
    finally:
        mr.close()


def test_copy_between_mrs(dev, hook):
    """srnic_mr_copy: page to page between MRs of two PDs whose buffers
    have different offsets in their pages; the destination needs
    LOCAL_WRITE."""
    with pyverbs_device.Context(name=dev) as ctx:
        with PD(ctx) as pd1, PD(ctx) as pd2:
            sbuf = posix_memalign(4 * PAGE, PAGE)
            dbuf = posix_memalign(4 * PAGE, PAGE)
            src = MR(pd1, 3 * PAGE, 0, address=sbuf + 3)
            dst = MR(pd2, 3 * PAGE, LW, address=dbuf + 1000)
            try:
                data = pattern(11, 3 * PAGE)
                src.write(data, len(data))
                dst.write(b"\0" * (3 * PAGE), 3 * PAGE)
                spdn, dpdn = pdn_of(dev, src), pdn_of(dev, dst)
                n = 2 * PAGE + 123
                assert hook(f"copy {dst.lkey:x} {dpdn} {dst.buf + 5:x} "
                            f"{src.lkey:x} {spdn} {src.buf + 17:x} {n}") == 0
                got = dst.read(3 * PAGE, 0)
                assert got[5:5 + n] == data[17:17 + n]
                assert got[:5] == b"\0" * 5
                assert got[5 + n:] == b"\0" * (3 * PAGE - 5 - n)
                # The source lacks LOCAL_WRITE: it cannot be a destination.
                assert hook(f"copy {src.lkey:x} {spdn} {src.buf:x} "
                            f"{dst.lkey:x} {dpdn} {dst.buf:x} 1") \
                    == errno.EACCES
                # Wrong PD for the source.
                assert hook(f"copy {dst.lkey:x} {dpdn} {dst.buf:x} "
                            f"{src.lkey:x} {dpdn} {src.buf:x} 1") \
                    == errno.EPERM
            finally:
                src.close()
                dst.close()
                free(sbuf)
                free(dbuf)


DEREG_SCRIPT = r"""
import sys
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
import os, sys  # noqa: E401
sys.path.insert(0, os.path.join(os.environ["SRNIC_REPO"], "tests"))
import verbs_enums as e
ctx = Context(name=sys.argv[1])
pd = PD(ctx)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
print(f"{mr.lkey:x} {mr.buf:x}", flush=True)
sys.stdin.readline()
mr.close()
print("deregistered", flush=True)
"""


def test_dereg_waits_for_inflight_access(dev, hook):
    """dereg_mr of an MR the data path holds blocks until the reference is
    dropped, and then completes."""
    proc = subprocess.Popen(["/usr/bin/python3", "-c", DEREG_SCRIPT, dev],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    held = False
    try:
        key, addr = proc.stdout.readline().split()
        pdn = [m["pdn"] for m in resource_mrs(dev)
               if m["lkey"] == int(key, 16)][0]
        assert hook(f"hold {key} {pdn} {addr}") == 0
        held = True
        proc.stdin.write("dereg\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 2.0)
        assert not ready, "dereg_mr returned while the MR was in use"
        # The key already misses: new accesses cannot start.
        assert hook(f"lookup l {key} {pdn} 0 {addr} 1") == errno.ENOENT
        assert hook("release") == 0
        held = False
        ready, _, _ = select.select([proc.stdout], [], [], 10.0)
        assert ready and proc.stdout.readline().strip() == "deregistered"
    finally:
        if held:
            hook("release")
        proc.kill()
        proc.wait()


def test_kernel_mrs(dev, hook):
    """get_dma_mr (behind ib_alloc_pd's local_dma_lkey), lookups and copies
    through it, alloc_mr's argument checks and map_mr_sg's page list: the
    hook's in-kernel self-test returns 0 only if every result is right."""
    assert hook("kernel") == 0
    out = run("rdma", "-j", "resource", "show", "pd").stdout
    # The self-test's PD is gone; ib_mad's (comm ib_core) stays.
    assert [p for p in json.loads(out or "[]") if p.get("ifname") == dev and
            p.get("comm") != "ib_core"] == []
