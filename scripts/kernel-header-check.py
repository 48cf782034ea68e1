#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check that every function srnic's kernel headers declare stands under the
heading of the file that defines it.

A heading is a comment that starts with a file name: "/* srnic_cq.c: ..."
or "/*\\n * srnic_mcast.c: ...". A declaration is a line starting a
non-static function prototype (name(...) ... ;). Its definition is found in
kernel/*.c by a line that starts with the return type and the name and does
not end in ';'. Prints each misplaced or undefined declaration; exits 1 if
there is any.

Usage: scripts/kernel-header-check.py [HEADER...] (default kernel/srnic.h)
"""
import glob
import re
import sys

HEADING = re.compile(r"^(?:/\*| \*) (srnic_\w+\.c)\b")
DECL = re.compile(r"^(?!static|#|\s|/|\*|})[^(;=]*?\b(srnic_\w+)\(")


def definitions():
    owner = {}
    for path in sorted(glob.glob("kernel/*.c") + glob.glob("kernel/test/*.c")):
        with open(path) as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            m = DECL.match(line)
            if not m:
                continue
            # The definition's prototype ends at ')' followed by '{' on the
            # next line; a declaration ends in ';'.
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith((")", ";", "{")):
                j += 1
            if j + 1 < len(lines) and lines[j].rstrip().endswith(")") and \
                    lines[j + 1].startswith("{"):
                owner.setdefault(m.group(1), path.split("/")[-1])
    return owner


def main():
    headers = sys.argv[1:] or ["kernel/srnic.h"]
    owner = definitions()
    bad = 0
    for header in headers:
        heading = None
        with open(header) as f:
            for n, line in enumerate(f, 1):
                m = HEADING.match(line)
                if m:
                    heading = m.group(1)
                    continue
                m = DECL.match(line)
                if not m or line.startswith(("extern const", "extern struct")):
                    continue
                name = m.group(1)
                where = owner.get(name)
                if where is None:
                    print(f"{header}:{n}: {name}() is defined in no kernel/*.c")
                    bad += 1
                elif where != heading:
                    print(f"{header}:{n}: {name}() is defined in {where}, "
                          f"declared under {heading or 'no heading'}")
                    bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
