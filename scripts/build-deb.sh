#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# build-deb.sh OUTDIR: build srnic's Debian packages for the system this runs on (the host, or
# a platform's root: make deb PLATFORM=NAME runs it there) into OUTDIR, with Debian's own tools
# (dpkg-buildpackage, debhelper, dh-dkms; debian/ holds the packaging):
#   srnic-dkms_VERSION_all.deb               the module's source for DKMS
#   ibverbs-provider-srnic_VERSION_amd64.deb the provider for this system's libibverbs
# VERSION is debian/changelog's with the platform's name appended (0.9.0+trixie): each
# platform's packages are built against its own kernel interfaces and libibverbs ABI.
#
# The packages are built from a copy of the sources (Kbuild, kernel/, userspace/, debian/,
# less any build output) in OUTDIR/src, so the tree's own builds never leak in.
set -euo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
out=${1:?usage: build-deb.sh OUTDIR}
platform=$("$REPO/scripts/platform" host)
base=$(dpkg-parsechangelog -l "$REPO/debian/changelog" -SVersion)
version=$base+$platform
stage=$out/src/srnic-$version

rm -rf "$out"
mkdir -p "$stage"
out=$(cd "$out" && pwd -P)
stage=$out/src/srnic-$version
(cd "$REPO" && tar -cf - --exclude='*.o' --exclude='.*.cmd' --exclude='*.ko' \
	--exclude='*.mod' --exclude='*.mod.c' --exclude='modules.order' \
	--exclude='Module.symvers' --exclude='.*.d' Kbuild kernel userspace debian \
	Documentation/srnic.7) |
	tar -xf - -C "$stage"
sed -i "1s/^srnic ([^)]*)/srnic ($version)/" "$stage/debian/changelog"

echo "build-deb: srnic $version for $("$REPO/scripts/platform" version-line "$platform" 2>/dev/null ||
	echo "$platform")"
if ! (cd "$stage" && dpkg-buildpackage -b -us -uc) >"$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log" >&2
	echo "build-deb: dpkg-buildpackage failed (log: $out/build.log)" >&2
	exit 1
fi
mv "$out"/src/*.deb "$out"/src/*.buildinfo "$out"/src/*.changes "$out/"
rm -rf "$out/src"
ls -1 "$out"/*.deb
