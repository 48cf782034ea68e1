#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The call (and data) edges between srnic's kernel files, from the built
objects: file A -> file B when A's object references a symbol B's defines
(nm: A's undefined symbol, B's T/D/R/B one). Inline functions in headers
leave no edge; a static function leaves none either (it is the file's own).

Usage: scripts/kernel-call-edges.py [--order FILE] [OBJ...]
  (default objects: kernel/srnic_*.o, built by `make module`)

Prints one line per file with the files it calls, then every cycle
(strongly connected group of files that call each other). With --order,
FILE lists the files in role order, lowest layer first, one per line
(blank lines and '#' comments ignored; several names on one line are one
layer, free to call each other): every edge that goes from a file to one
in a layer above it is printed as a back edge, and the exit status is 1
if there is any.
"""
import argparse
import collections
import glob
import os
import subprocess
import sys


def symbols(obj):
    """(defined, undefined) global symbol names of one object."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True,
                         check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDRBV":
            defined.add(parts[2])
    return defined, undefined


def edges_of(objs):
    owner, wants = {}, {}
    for obj in objs:
        name = os.path.basename(obj)[:-2]
        defined, wants[name] = symbols(obj)
        for sym in defined:
            owner[sym] = name
    edges = collections.defaultdict(lambda: collections.defaultdict(set))
    for name, syms in wants.items():
        for sym in syms:
            dst = owner.get(sym)
            if dst and dst != name:
                edges[name][dst].add(sym)
    return sorted(wants), edges


def cycles(nodes, edges):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def read_order(path):
    layer_of = {}
    with open(path) as f:
        layer = 0
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                for name in line:
                    layer_of[name.removesuffix(".c")] = layer
                layer += 1
    return layer_of


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--order")
    ap.add_argument("--quiet", action="store_true",
                    help="print only what breaks the order, and the count")
    ap.add_argument("objs", nargs="*")
    args = ap.parse_args()
    objs = args.objs or sorted(glob.glob("kernel/srnic_*.o"))
    if not objs:
        sys.exit("kernel-call-edges: no objects: run `make module` first")
    nodes, edges = edges_of(objs)
    if not args.quiet:
        for name in nodes:
            print(f"{name} -> {' '.join(sorted(edges[name])) or '(none)'}")
        for group in cycles(nodes, edges):
            print(f"cycle: {' '.join(group)}")
    if not args.order:
        return 0
    layer_of = read_order(args.order)
    missing = [n for n in nodes if n not in layer_of]
    back = [(a, b) for a in nodes for b in edges[a]
            if a in layer_of and b in layer_of and layer_of[b] > layer_of[a]]
    for name in missing:
        print(f"not in {args.order}: {name}")
    for a, b in back:
        print(f"back edge: {a} -> {b} ({', '.join(sorted(edges[a][b]))})")
    print(f"{len(back)} back edges, {len(missing)} files without a layer")
    return 1 if back or missing else 0


if __name__ == "__main__":
    sys.exit(main())
