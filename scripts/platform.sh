# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0
# Platforms (scripts/platforms.conf): their names, roots and versions, and running a command
# inside a platform's root. Sourced by scripts/platform-root.sh, scripts/platform-run and the
# VM scripts; not executed.
#
# A platform is a Debian release srnic builds and runs on. bookworm (Debian 12) is the host's
# own root; the others live in debootstrap roots under $SRNIC_ROOTS_DIR (default
# ~/.cache/srnic/roots), made by scripts/platform-root.sh. Each root records what it was made
# with in /etc/srnic-platform (platform_versions prints it).

PLATFORM_REPO=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd -P)
PLATFORM_CONF=$PLATFORM_REPO/scripts/platforms.conf
PLATFORM_PRIMARY=bookworm
: "${SRNIC_ROOTS_DIR:=${HOME:-/root}/.cache/srnic/roots}"

platform_die() {
	echo "platform: $*" >&2
	exit 1
}

# platform_field NAME COLUMN: one column (2 suite, 3 kernel, 4 rdma-core) of NAME's row.
platform_field() {
	awk -v n="$1" -v c="$2" '!/^#/ && NF >= 4 && $1 == n { print $c; found = 1 }
		END { exit !found }' "$PLATFORM_CONF"
}

# platform_names: every platform, primary first.
platform_names() {
	awk '!/^#/ && NF >= 4 { print $1 }' "$PLATFORM_CONF"
}

platform_check() {
	platform_field "$1" 2 >/dev/null ||
		platform_die "unknown platform '$1' (known: $(platform_names | tr '\n' ' '))"
}

# platform_host: the codename of the system this runs on (inside a platform root: that root's).
platform_host() {
	if [ -f /etc/srnic-platform ]; then
		sed -n 's/^PLATFORM=//p' /etc/srnic-platform
		return
	fi
	# shellcheck disable=SC1091
	(. /etc/os-release && echo "${VERSION_CODENAME:-unknown}")
}

# platform_is_host NAME: NAME's root is the running system's root.
platform_is_host() {
	[ "$(platform_host)" = "$1" ]
}

# platform_root NAME: the root directory of NAME ("/" for the host's own).
platform_root() {
	if [ "$(platform_field "$1" 2)" = host ]; then
		echo /
	else
		echo "$SRNIC_ROOTS_DIR/$1"
	fi
}

# platform_kernel ROOT: the newest kernel release with an image in ROOT/boot.
platform_kernel() {
	find "${1%/}/boot" -maxdepth 1 -name 'vmlinuz-*' -printf '%f\n' 2>/dev/null |
		sed 's/^vmlinuz-//' | sort -V | tail -n 1 | grep .
}

# platform_versions ROOT: what the root's platform is made of, one "key=value" a line.
platform_versions() {
	local root=${1%/} kver
	if [ -f "$root/etc/srnic-platform" ]; then
		cat "$root/etc/srnic-platform"
		return
	fi
	kver=$(platform_kernel "$root/") || kver=none
	# shellcheck disable=SC1091
	echo "PLATFORM=$(. "$root/etc/os-release" && echo "${VERSION_CODENAME:-unknown}")"
	echo "KERNEL=$kver"
	echo "KERNEL_PACKAGE=$(platform_pkg_version "$root" "linux-image-$kver")"
	echo "RDMA_CORE=$(platform_pkg_version "$root" rdma-core)"
	echo "GCC=$(platform_pkg_version "$root" gcc)"
	echo "PYTHON=$(platform_pkg_version "$root" python3)"
}

# platform_pkg_version ROOT PACKAGE: the installed version of PACKAGE in ROOT, or "none".
platform_pkg_version() {
	dpkg-query --admindir="${1%/}/var/lib/dpkg" -W -f='${Version}' "$2" 2>/dev/null || echo none
}

# platform_version_line NAME: the versions of NAME's root on one line, for every run's log.
platform_version_line() {
	local root
	root=$(platform_root "$1")
	[ -d "$root" ] || { echo "$1: no root yet ($root)"; return; }
	platform_versions "$root" | grep -E '^(KERNEL|KERNEL_PACKAGE|RDMA_CORE|GCC|MADE)=' |
		tr '\n' ' ' | sed "s/^/$1: /; s/ \$//"
	echo
}

# platform_chroot ROOT [--repo] [--tmp] [--] COMMAND...: COMMAND in ROOT (a chroot), with the
# host's /proc, /sys and /dev, in a private mount namespace (the mounts vanish with it) and a
# clean environment (PATH, HOME, LANG, and for maintainer scripts DEBIAN_FRONTEND=noninteractive
# and INITRD=No). --repo binds the repo at its own path and starts COMMAND there; --tmp mounts
# a fresh tmpfs on /tmp. ROOT is first bound onto itself, so that tools inside (unshare, the
# unit tests) can change its propagation as on a booted system.
platform_chroot() {
	local root=$1 repo= tmp=0
	shift
	while [ $# -gt 0 ]; do
		case "$1" in
		--repo) repo=$PLATFORM_REPO; shift ;;
		--tmp) tmp=1; shift ;;
		--) shift; break ;;
		*) break ;;
		esac
	done
	unshare --mount --propagation private -- /bin/bash -c '
		set -e
		root=$1 repo=$2 tmp=$3
		shift 3
		mount --bind "$root" "$root"
		for d in proc sys dev dev/pts; do mount --rbind "/$d" "$root/$d"; done
		[ "$tmp" = 0 ] || mount -t tmpfs tmpfs "$root/tmp"
		if [ -n "$repo" ]; then
			mkdir -p "$root$repo"
			mount --bind "$repo" "$root$repo"
		fi
		exec chroot "$root" /usr/bin/env -i \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
			LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive INITRD=No \
			/bin/sh -c "cd \"\${0:-/}\" && exec \"\$@\"" "$repo" "$@"
	' platform-chroot "$root" "$repo" "$tmp" "$@"
}

# platform_run NAME COMMAND...: run COMMAND in NAME's root with the repo at its own path
# (platform_chroot --repo). On the host's own platform COMMAND simply runs.
platform_run() {
	local name=$1 root
	shift
	if platform_is_host "$name"; then
		"$@"
		return
	fi
	root=$(platform_root "$name")
	[ -f "$root/etc/srnic-platform" ] ||
		platform_die "no $name root in $root: run 'make root PLATFORM=$name'"
	platform_chroot "$root" --repo -- "$@"
}

# platform_build_dir NAME: where NAME's builds go, relative to the repo: "." for the primary
# platform (srnic.ko in the repo root, the provider in build/userspace, as `make -C KDIR M=$PWD`
# leaves them), build/platform/NAME for the others (the module in module/, built from links to
# the sources, so that each kernel's objects stay apart).
platform_build_dir() {
	if [ "$1" = "$PLATFORM_PRIMARY" ]; then
		echo .
	else
		echo "build/platform/$1"
	fi
}

# platform_module NAME: the path of NAME's srnic.ko; platform_provider_dir NAME: the directory
# of its libsrnic-rdmav*.so.
platform_module() {
	if [ "$1" = "$PLATFORM_PRIMARY" ]; then
		echo "$PLATFORM_REPO/srnic.ko"
	else
		echo "$PLATFORM_REPO/build/platform/$1/module/srnic.ko"
	fi
}

platform_provider_dir() {
	if [ "$1" = "$PLATFORM_PRIMARY" ]; then
		echo "$PLATFORM_REPO/build/userspace"
	else
		echo "$PLATFORM_REPO/build/platform/$1/userspace"
	fi
}
