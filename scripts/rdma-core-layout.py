#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Check the provider's layout assertions against an rdma-core source tree.

Usage: scripts/rdma-core-layout.py RDMA_CORE_SRC [--cc CC]

userspace/abi/layouts.h pins, for each rdma-core version srnic supports, the
size and offsets of every libibverbs struct the provider shares with
libibverbs (static_assert(EXPR == NUMBER)). Distributions do not install
libibverbs' private headers, so those numbers are measured from rdma-core's
own sources: this script takes the version from RDMA_CORE_SRC's
CMakeLists.txt, selects that version's assertions from layouts.h (the C
preprocessor with SRNIC_RDMA_CORE_MAJOR and SRNIC_IBVERBS_PABI set as CMake
sets them), compiles each EXPR against the tree's own driver.h, kern-abi.h
and verbs.h (with the generated kernel-abi header made by the tree's
buildlib/make_abi_structs.py), and prints each EXPR with the value rdma-core
gives it and the one layouts.h claims.

Porting srnic's provider to a new rdma-core: fetch its sources (`fetch
github:linux-rdma/rdma-core` at its tag, or `apt-get source --download-only
rdma-core` in a sid root), add its version to layouts.h (start from the
nearest version's block), run this until it reports no mismatch, and read
the tree's driver.h diff for changed prototypes (userspace/abi/pabi*.h).

Exit status: 0 when every assertion holds, 1 on a mismatch, 2 on errors.
Assertions between two expressions (no literal) are checked by the
provider's own build and skipped here.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUTS = os.path.join(REPO, "userspace", "abi", "layouts.h")


def rdma_core_version(src):
    text = open(os.path.join(src, "CMakeLists.txt")).read()
    version = re.search(r'set\(PACKAGE_VERSION "([0-9.]+)"\)', text).group(1)
    pabi = re.search(r'set\(IBVERBS_PABI_VERSION "([0-9]+)"\)', text).group(1)
    return version, int(version.split(".")[0]), int(pabi)


def assertions(cc, major, pabi):
    """(expr, number) of every static_assert(expr == number) of this version."""
    pre = subprocess.run(
        [cc, "-E", "-P", "-x", "c", f"-DSRNIC_RDMA_CORE_MAJOR={major}",
         f"-DSRNIC_IBVERBS_PABI={pabi}", "-DSRNIC_LAYOUT_CHECK", LAYOUTS],
        capture_output=True, text=True)
    if pre.returncode:
        sys.exit(f"rdma-core-layout: preprocessing {LAYOUTS} failed:\n{pre.stderr}")
    text = " ".join(pre.stdout.split())
    out = []
    for body in re.findall(r"static_assert\((.*?)\);", text):
        m = re.fullmatch(r"(.*\S)\s*==\s*(\d+)", body)
        if m:
            out.append((m.group(1), int(m.group(2))))
    return out


def build_includes(src, work):
    inc = os.path.join(work, "include")
    os.makedirs(os.path.join(inc, "infiniband"))
    os.makedirs(os.path.join(inc, "kernel-abi"))
    # rdma-core publishes libibverbs' headers, and some kernel headers too,
    # as <infiniband/*.h>.
    for d in ("libibverbs", os.path.join("kernel-headers", "rdma")):
        for h in os.listdir(os.path.join(src, d)):
            dst = os.path.join(inc, "infiniband", h)
            if h.endswith(".h") and not os.path.exists(dst):
                os.symlink(os.path.join(src, d, h), dst)
    subprocess.run([sys.executable, os.path.join(src, "buildlib", "make_abi_structs.py"),
                    os.path.join(src, "kernel-headers", "rdma", "ib_user_verbs.h"),
                    os.path.join(inc, "kernel-abi", "ib_user_verbs.h")], check=True)
    with open(os.path.join(inc, "config.h"), "w") as f:
        f.write("#define HAVE_STATEMENT_EXPR 1\n#define HAVE_TYPEOF 1\n"
                "#define HAVE_BUILTIN_TYPES_COMPATIBLE_P 1\n")
    return [f"-I{inc}", f"-I{os.path.join(src, 'kernel-headers')}", f"-I{src}"]


def measure(cc, src, exprs):
    work = tempfile.mkdtemp(prefix="rdma-core-layout.")
    try:
        flags = build_includes(src, work)
        prog = os.path.join(work, "layout.c")
        with open(prog, "w") as f:
            f.write("#include <stdalign.h>\n#include <stddef.h>\n#include <stdio.h>\n"
                    "#include <infiniband/driver.h>\n#include <infiniband/kern-abi.h>\n"
                    "int main(void)\n{\n")
            for e in exprs:
                f.write(f'\tprintf("%zu\\n", (size_t)({e}));\n')
            f.write("\treturn 0;\n}\n")
        exe = os.path.join(work, "layout")
        cc_run = subprocess.run([cc, "-std=gnu11", "-w", *flags, prog, "-o", exe],
                                capture_output=True, text=True)
        if cc_run.returncode:
            sys.exit(f"rdma-core-layout: compiling against {src} failed:\n"
                     f"{cc_run.stderr[-4000:]}")
        values = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        return [int(v) for v in values.split()]
    finally:
        shutil.rmtree(work)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", help="an rdma-core source tree")
    ap.add_argument("--cc", default="cc")
    args = ap.parse_args()
    version, major, pabi = rdma_core_version(args.src)
    checks = assertions(args.cc, major, pabi)
    if not checks:
        print(f"rdma-core {version} (private ABI {pabi}): layouts.h has no assertions "
              f"for it: add a block for SRNIC_RDMA_CORE_MAJOR == {major}")
        return 1
    # C spells alignof with <stdalign.h>; the C++ header's expressions are C otherwise.
    values = measure(args.cc, args.src, [e for e, _ in checks])
    bad = 0
    for (expr, claimed), real in zip(checks, values):
        mark = "ok" if real == claimed else "MISMATCH"
        bad += real != claimed
        print(f"{mark:8} {expr} = {real} (layouts.h: {claimed})")
    print(f"rdma-core {version} (private ABI {pabi}): {len(checks)} assertions, "
          f"{bad} mismatched")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
