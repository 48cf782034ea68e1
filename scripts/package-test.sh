#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# package-test.sh NAME: srnic's packages for platform NAME (build/deb/NAME, make deb), installed,
# used and removed as a user would (make package-test PLATFORM=NAME):
#
#   1. a copy-on-write overlay of NAME's root (the host's / for bookworm) in build/pkgroot/NAME;
#   2. `dpkg -i` of srnic-dkms and ibverbs-provider-srnic in it (chroot): DKMS builds srnic.ko
#      for the root's kernel and installs it in /lib/modules/<release>/updates/dkms. This runs
#      natively on the host rather than in the guest because DKMS's compile and depmod take
#      more than five minutes under TCG (seen on Debian 13);
#   3. that root booted in the VM with no build-tree module or provider: tests/test_packages.py
#      checks that what loads is the packaged module and provider and runs the standard tools;
#   4. `dpkg --purge` of both in the overlay, then every file the install added must be gone
#      again and nothing that was there before may be missing: the overlay's upper layer holds
#      exactly what changed, so it may only hold dpkg's and apt's own bookkeeping (and files the
#      maintainer scripts rewrote in place, like module indexes, which must not name srnic).
#
# Exit status 0 when every step passed. Logs: build/pkgroot/NAME/{install,purge}.log.
set -uo pipefail

REPO=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd -P)
cd "$REPO" || exit 2
# shellcheck source=platform.sh
. scripts/platform.sh
name=${1:?usage: package-test.sh NAME}
scripts/platform check "$name" || exit 2
root=$(scripts/platform root "$name") || exit 2
root=${root%/}/

die() {
	echo "package-test: $name: $*" >&2
	exit 1
}

debs=()
for pkg in srnic-dkms ibverbs-provider-srnic; do
	mapfile -t found < <(ls "build/deb/$name/${pkg}_"*.deb 2>/dev/null)
	[ ${#found[@]} = 1 ] ||
		die "want one ${pkg} package in build/deb/$name, found ${#found[@]}: run make deb PLATFORM=$name"
	debs+=("${found[0]}")
done

dir=$REPO/build/pkgroot/$name
merged=$dir/merged
umount "$merged" 2>/dev/null
rm -rf "$dir"
mkdir -p "$dir/upper" "$dir/work" "$merged"
mount -t overlay overlay -o "lowerdir=$root,upperdir=$dir/upper,workdir=$dir/work" "$merged" ||
	die "cannot mount an overlay of $root"
# shellcheck disable=SC2317  # the EXIT trap
cleanup() { umount "$merged" 2>/dev/null || umount -l "$merged"; }
trap cleanup EXIT

# in_root CMD...: CMD in the overlay root, with a /tmp of its own.
in_root() { platform_chroot "$merged" --tmp -- "$@"; }

kver=$(ls "$merged/boot" | sed -n 's/^vmlinuz-//p' | sort -V | tail -n 1)
echo "package-test: $name: installing $(basename "${debs[0]}") $(basename "${debs[1]}")" \
	"into an overlay of $root (kernel $kver)"
mkdir -p "$merged/var/cache/srnic-package-test"
cp "${debs[@]}" "$merged/var/cache/srnic-package-test/"
start=$(date +%s)
if ! in_root sh -c 'dpkg -i /var/cache/srnic-package-test/*.deb' >"$dir/install.log" 2>&1; then
	tail -n 30 "$dir/install.log" >&2
	die "dpkg -i failed (log: $dir/install.log)"
fi
rm -rf "$merged/var/cache/srnic-package-test"
echo "package-test: $name: installed in $(($(date +%s) - start)) s; $(in_root dkms status srnic)"

status=0
SRNIC_VM_ROOT=$merged scripts/run-vm-suites.sh --platform "$name" tests/test_packages.py ||
	status=1

if ! in_root dpkg --purge srnic-dkms ibverbs-provider-srnic >"$dir/purge.log" 2>&1; then
	tail -n 30 "$dir/purge.log" >&2
	die "dpkg --purge failed (log: $dir/purge.log)"
fi

# What the install and purge left in the upper layer, less what dpkg and apt keep of their
# own, man-db's index (its trigger and `man srnic` in the suite rebuild /var/cache/man), and
# DKMS's module signing key (which DKMS makes on its first build where openssl is installed
# and keeps for every module after): new paths are leftovers; whiteouts (character devices
# 0/0) are files that went missing.
leftovers=$(cd "$dir/upper" && find . -mindepth 1 |
	sed 's|^\.||' | grep -Ev '^/(var/lib/dpkg|var/log|var/cache/(debconf|ldconfig|man)|var/lib/apt|tmp|root/\.cache)(/|$)' |
	grep -Ev '^/etc/ld\.so\.cache$|^/lib/modules/[^/]+/modules\.[a-z.]+$|^/usr/lib/modules/[^/]+/modules\.[a-z.]+$' |
	grep -Ev '^/var/lib/dkms/mok\.(key|pub)$' |
	while read -r path; do
		if [ -c "$dir/upper$path" ]; then
			echo "removed: $path"
		elif [ ! -e "$root${path#/}" ] && [ ! -L "$root${path#/}" ]; then
			echo "left behind: $path"
		fi
	done)
if [ -n "$leftovers" ]; then
	echo "package-test: $name: dpkg --purge did not restore the root:" >&2
	echo "$leftovers" | sed 's/^/    /' >&2
	status=1
fi
if grep -qs srnic "$merged/lib/modules/$kver/modules.dep"; then
	echo "package-test: $name: modules.dep still names srnic after the purge" >&2
	status=1
fi
[ -z "$(in_root dkms status srnic 2>/dev/null)" ] ||
	{ echo "package-test: $name: dkms still knows srnic after the purge" >&2; status=1; }
if [ $status = 0 ]; then
	echo "package-test: $name: installed, used in the VM, purged without leftovers"
else
	echo "package-test: $name: FAILED" >&2
fi
exit $status
