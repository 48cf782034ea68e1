# SPDX-License-Identifier: GPL-2.0
"""`make install` / `make uninstall` put srnic where a real host needs it:
the module under /lib/modules/<ver>/updates (depmod'ed, so modprobe and the
link-type alias work) and the provider in libibverbs' provider directory
with /etc/libibverbs.d/srnic.driver naming it.

Runs in the VM, whose root is a throwaway overlay of the host's.
"""
import glob
import os
import subprocess

from harness import Veth, ib_devices, link_add, module_loaded, run

KVER = os.uname().release
MODULE = f"/lib/modules/{KVER}/updates/srnic.ko"
DRIVER_CONF = "/etc/libibverbs.d/srnic.driver"
MAN_PAGE = "/usr/share/man/man7/srnic.7"


def built_provider_dir():
    """Where this platform's provider is built (scripts/platform
    provider-dir)."""
    return run("scripts/platform", "provider-dir",
               run("scripts/platform", "host").stdout.strip()).stdout.strip()


def provider_dir():
    libdir = run("pkg-config", "--variable=libdir", "libibverbs").stdout.strip()
    return f"{libdir}/libibverbs"


OPEN_AND_SHOW_PROVIDER = r"""
import sys
from pyverbs.device import Context
with Context(name=sys.argv[1]):
    maps = open("/proc/self/maps").read()
    print([l.split()[-1] for l in maps.splitlines() if "libsrnic" in l][0])
"""


def test_uninstall_then_install(tmp_path):
    """Staged first (DESTDIR, as a package build installs: no depmod), where
    uninstall must take every file away again; then for real, over the
    module the VM booted with, and used. (A real uninstall's depmod is
    left out: depmod over the root's modules takes 40 s in the VM.)"""
    if module_loaded():
        run("rmmod", "srnic")
    # libsrnic-rdmav<ABI>.so, ABI being this libibverbs' private one.
    built = glob.glob(f"{built_provider_dir()}/libsrnic-rdmav*.so")
    assert len(built) == 1, built
    provider = f"{provider_dir()}/{os.path.basename(built[0])}"
    files = (MODULE, DRIVER_CONF, provider, MAN_PAGE)

    stage = tmp_path / "stage"
    run("make", "install", f"DESTDIR={stage}", timeout=300)
    for path in files:
        assert os.path.exists(f"{stage}{path}"), path
    run("make", "uninstall", f"DESTDIR={stage}", timeout=300)
    for path in files:
        assert not os.path.exists(f"{stage}{path}"), path

    run("make", "install", timeout=300)
    assert os.path.exists(MODULE)
    assert os.path.exists(provider)
    with open(DRIVER_CONF) as f:
        assert f.read().split() == ["driver", "srnic"]
    # man srnic finds the page (srnic(7)) and renders it.
    assert run("man", "-w", "srnic").stdout.strip() == MAN_PAGE
    assert "rdma link add" in run("man", "7", "srnic").stdout

    pair = Veth()
    try:
        # The link-type alias autoloads the installed module.
        link_add("inst0", pair.a)
        assert module_loaded()
        assert "inst0" in ib_devices()
        out = subprocess.run(["/usr/bin/python3", "-c", OPEN_AND_SHOW_PROVIDER,
                              "inst0"], capture_output=True, text=True,
                             check=True).stdout
        assert out.strip() == provider
        run("rdma", "link", "delete", "inst0")
    finally:
        pair.close()
