# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0
# Helpers for scripts/vm-run, sourced (not executed): the kernel's release and PVH entry, the
# cached initramfs that mounts a root over 9p and switch_roots into it (its /init, stage 1, is
# in vm_initramfs_init below), and the host-side depmod for the module under test.
#
# The initramfs is independent of the command being run: everything per-run (repo path, results
# dir, command, module) reaches the guest through the "srnic_ctl" 9p share, so one image serves
# every run of the same kernel + root + scripts.

# Modules the first stage needs to reach the 9p root. Their dependencies are resolved with
# modprobe --show-depends against ROOT's module tree; built-in ones are skipped.
# virtio_console carries the command's output; configfs is mounted for tests.
VM_INITRAMFS_MODULES=(virtio_pci 9pnet_virtio 9p overlay virtio_console configfs)
# Packed too, but loaded by stage 1 only when the run asks for NICs.
VM_INITRAMFS_OPTIONAL_MODULES=(virtio_net)

# 9p mount options shared by both stages. msize: the largest message the virtio transport takes
# in one go; large messages make bulk reads (module files, python imports) far cheaper.
VM_9P_OPTS="trans=virtio,version=9p2000.L,msize=512000"

# Set by vm_initramfs.
VM_INITRAMFS=
# Paths removed by vm-run's EXIT trap (temporary dirs of an interrupted build, the run's ctl dir).
VM_CLEANUP=()

vm_die() {
	echo "vm-run: $*" >&2
	exit 125
}

# vm_kernel_version IMAGE: print the release string stored in a bzImage's setup header
# (the same string uname -r reports), or fail if IMAGE is not a bzImage.
vm_kernel_version() {
	local img=$1 magic off
	magic=$(dd if="$img" bs=1 skip=$((0x202)) count=4 status=none) || return 1
	[ "$magic" = "HdrS" ] || return 1
	# 0x20e: offset of the version string, minus 0x200 (boot protocol >= 2.00).
	off=$(od -An -tu2 -j $((0x20e)) -N2 "$img" | tr -d ' ')
	dd if="$img" bs=1 skip=$((off + 0x200)) count=256 status=none |
		tr '\0' '\n' | head -n 1 | cut -d ' ' -f 1 | grep .
}

# vm_pvh_kernel IMAGE KVER CACHEDIR: set VM_BOOT_KERNEL to the kernel QEMU should boot. A
# bzImage makes the guest decompress itself (XZ for Debian 12's kernel), which takes 5-7 s under
# TCG; the vmlinux ELF inside it boots directly through its PVH entry point. So the payload is
# decompressed here once, cached, and used when it carries the PVH ELF note (XEN_ELFNOTE_
# PHYS32_ENTRY, note type 0x12); otherwise, or if SRNIC_VM_PVH=0, the bzImage itself.
VM_BOOT_KERNEL=
vm_pvh_kernel() {
	local img=$1 kver=$2 cachedir=$3 key elf part setup_sects payload_off payload_len start magic
	local -a decomp
	VM_BOOT_KERNEL=$img
	[ "${SRNIC_VM_PVH:-1}" = 1 ] || return 0
	command -v readelf >/dev/null || return 0
	key=$(stat -L -c '%n %s %Y' "$img" | sha256sum | cut -c 1-16)
	elf=$cachedir/vmlinux-$kver-$key.elf
	if [ ! -f "$elf" ]; then
		# Setup header: setup_sects at 0x1f1 (0 means 4), payload_offset/length at 0x248/0x24c,
		# the offset counted from the end of the real-mode setup code.
		setup_sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$img" | tr -d ' ')
		[ "$setup_sects" -ne 0 ] || setup_sects=4
		payload_off=$(od -An -tu4 -j $((0x248)) -N4 "$img" | tr -d ' ')
		payload_len=$(od -An -tu4 -j $((0x24c)) -N4 "$img" | tr -d ' ')
		start=$(((setup_sects + 1) * 512 + payload_off))
		magic=$(od -An -tx1 -j "$start" -N4 "$img" | tr -d ' ')
		rm -f "$cachedir/vmlinux-$kver-"*.elf
		# The kernel appends the decompressed size (4 bytes) to XZ and ZSTD payloads.
		case "$magic" in
		fd377a58) decomp=(xz -dc) payload_len=$((payload_len - 4)) ;;
		28b52ffd) decomp=(zstd -qdc) payload_len=$((payload_len - 4)) ;;
		1f8b*) decomp=(gzip -dc) ;;
		*) return 0 ;;
		esac
		part=$(mktemp "$elf.XXXXXX")
		VM_CLEANUP+=("$part")
		if ! dd if="$img" iflag=skip_bytes,count_bytes skip="$start" count="$payload_len" \
			bs=4M status=none | "${decomp[@]}" >"$part" 2>/dev/null; then
			echo "vm-run: cannot unpack $img; booting it as is (slower)" >&2
			return 0
		fi
		mv -f "$part" "$elf"
	fi
	if readelf -n "$elf" 2>/dev/null | grep -q 'Xen.*(0x00000012)'; then
		# shellcheck disable=SC2034  # read by vm-run
		VM_BOOT_KERNEL=$elf
	fi
}

# vm_decompress_module SRC DST: copy a module, decompressing .ko.xz / .ko.zst / .ko.gz.
vm_decompress_module() {
	local src=$1 dst=$2
	case "$src" in
	*.ko) cp "$src" "$dst" ;;
	*.ko.xz) xz -dc "$src" >"$dst" ;;
	*.ko.zst) zstd -qdc "$src" >"$dst" ;;
	*.ko.gz) gzip -dc "$src" >"$dst" ;;
	*) vm_die "unknown module format: $src" ;;
	esac
}

# vm_initramfs_init: print the first-stage /init (busybox sh). It mounts the ctl share to learn
# the run's paths, builds the guest's root as a tmpfs overlay over the read-only host root, mounts
# the repo and results shares at their host paths, prepares the guest's /proc, /sys, /dev, /tmp,
# /run etc., and execs scripts/vm-guest-init.sh as PID 1. Mounting here with the static busybox
# already in memory is fast; every exec of a dynamically linked program over 9p costs 0.1-0.5 s
# under TCG, so stage 2 keeps its execs to a handful.
vm_initramfs_init() {
	cat <<'EOF_INIT'
#!/bin/sh
# srnic VM, stage 1 (generated by scripts/vm-lib.sh). Runs from the initramfs as PID 1.
export PATH=/bin

say() {
	read -r up _ </proc/uptime
	echo "srnic-vm: [$up] stage 1: $*" >/dev/console
}
die() {
	echo "srnic-vm: stage 1: FATAL: $*" >/dev/console
	echo o >/proc/sysrq-trigger
	while :; do sleep 60; done
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

for m in $(cat /etc/srnic-vm-modules); do
	modprobe "$m" || die "modprobe $m failed"
done
say "modules loaded"

# mount9p TAG DIR OPTS: the virtio devices may still be probing; retry briefly.
mount9p() {
	i=0
	until mount -t 9p -o "@OPTS@,$3" "$1" "$2" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 50 ] || { mount -t 9p -o "@OPTS@,$3" "$1" "$2"; die "cannot mount 9p tag $1"; }
		sleep 0.1
	done
}

mkdir -p /ctl /lower /rw /newroot
mount9p srnic_ctl /ctl cache=none
. /ctl/env || die "cannot read /ctl/env"
if [ "$SRNIC_VM_NICS" -gt 0 ]; then
	for m in $(cat /etc/srnic-vm-nic-modules); do
		modprobe "$m" || die "modprobe $m failed"
	done
fi

# Root: read-only host root (page cache on: it does not change under a run) + tmpfs upper.
mount9p hostroot /lower ro,cache=loose
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/root/upper /rw/root/work /rw/repo/upper /rw/repo/work /rw/repo/lower
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/root/upper,workdir=/rw/root/work \
	/newroot || die "overlay root mount failed"
R=/newroot

# Fresh /tmp and /run first, so that a repo or results dir below them (a CI clone in /tmp) is
# mounted on top of them rather than hidden by them.
mkdir -p "$R/tmp" "$R/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$R/tmp"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$R/run"
mkdir -p "$R/run/lock"

# Repo at its host path: read-only + overlay (guest writes vanish), or writable on request.
mkdir -p "$R$SRNIC_VM_REPO"
if [ "$SRNIC_VM_REPO_RW" = 1 ]; then
	mount9p srnic_repo "$R$SRNIC_VM_REPO" cache=mmap
else
	mount9p srnic_repo /rw/repo/lower ro,cache=loose
	mount -t overlay overlay \
		-o lowerdir=/rw/repo/lower,upperdir=/rw/repo/upper,workdir=/rw/repo/work \
		"$R$SRNIC_VM_REPO" || die "overlay repo mount failed"
fi

# Results: writable, written through to the host.
mkdir -p "$R$SRNIC_VM_RESULTS"
mount9p srnic_results "$R$SRNIC_VM_RESULTS" cache=mmap

# The control dir moves along so stage 2 can read the command and write its status.
mkdir -p "$R/.srnic-vm"
mount --move /ctl "$R/.srnic-vm"

# The guest's system mounts, as a booted system has them.
mkdir -p "$R/proc" "$R/sys" "$R/dev"
mount --move /proc "$R/proc"
mount --move /sys "$R/sys"
mount --move /dev "$R/dev"
mkdir -p "$R/dev/pts" "$R/dev/shm" "$R/dev/mqueue"
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts "$R/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$R/dev/shm"
mount -t mqueue mqueue "$R/dev/mqueue"
ln -sfn /proc/self/fd "$R/dev/fd"
ln -sfn /proc/self/fd/0 "$R/dev/stdin"
ln -sfn /proc/self/fd/1 "$R/dev/stdout"
ln -sfn /proc/self/fd/2 "$R/dev/stderr"
mount -t debugfs debugfs "$R/sys/kernel/debug"
mount -t configfs configfs "$R/sys/kernel/config"
mount -t cgroup2 cgroup2 "$R/sys/fs/cgroup"

ip link set lo up
hostname srnic-vm

stage2="$SRNIC_VM_REPO/scripts/vm-guest-init.sh"
[ -f "$R$stage2" ] || die "missing $stage2"
say "switching root"
exec switch_root "$R" /bin/bash "$stage2" /.srnic-vm
die "switch_root failed"
EOF_INIT
}

# vm_build_initramfs OUT KVER ROOT: write an uncompressed cpio (the kernel unpacks it faster
# than a compressed one under TCG) with static busybox and the modules in VM_INITRAMFS_MODULES
# plus their dependencies, taken from ROOT/lib/modules/KVER and depmod'ed for busybox modprobe.
# Modules built into the kernel (a debug kernel has them so) are left out of the lists stage 1
# loads: busybox modprobe does not know modules.builtin.
vm_build_initramfs() {
	local out=$1 kver=$2 root=$3
	local moddir="${root%/}/lib/modules/$kver" tmp m deps line path rel f loadable
	local -a paths=() load=() load_nic=()

	[ -d "$moddir" ] || vm_die "no modules for $kver in $moddir (wrong --root or --kver?)"
	[ -x /bin/busybox ] || vm_die "/bin/busybox missing: run scripts/setup-deps.sh"

	for m in "${VM_INITRAMFS_MODULES[@]}" "${VM_INITRAMFS_OPTIONAL_MODULES[@]}"; do
		deps=$(modprobe --show-depends -d "$root" -S "$kver" "$m") ||
			vm_die "cannot resolve module $m in $moddir"
		# Lines are "insmod /path/mod.ko[.xz] [params]" or "builtin mod" (nothing to do).
		loadable=0
		while read -r line; do
			case "$line" in
			insmod\ *) path=${line#insmod }; paths+=("${path%% *}"); loadable=1 ;;
			builtin\ *) ;;
			*) vm_die "unexpected modprobe output for $m: $line" ;;
			esac
		done <<<"$deps"
		[ "$loadable" = 1 ] || continue
		if [[ " ${VM_INITRAMFS_OPTIONAL_MODULES[*]} " == *" $m "* ]]; then
			load_nic+=("$m")
		else
			load+=("$m")
		fi
	done

	tmp=$(mktemp -d "${out}.tmp.XXXXXX")
	VM_CLEANUP+=("$tmp")
	local fs=$tmp/root
	mkdir -p "$fs"/{bin,dev,proc,sys,etc,lib/modules/"$kver"}
	cp /bin/busybox "$fs/bin/busybox"
	for m in $(/bin/busybox --list); do
		[ "$m" = busybox ] || ln -s busybox "$fs/bin/$m"
	done

	for path in $(printf '%s\n' ${paths[@]+"${paths[@]}"} | awk 'NF && !seen[$0]++'); do
		rel=${path#*/lib/modules/"$kver"/} # modprobe may print the root as // or /./
		rel=${rel%.xz}
		rel=${rel%.zst}
		rel=${rel%.gz}
		mkdir -p "$fs/lib/modules/$kver/$(dirname "$rel")"
		vm_decompress_module "$path" "$fs/lib/modules/$kver/$rel"
		echo "$rel" >>"$fs/lib/modules/$kver/modules.order"
	done
	touch "$fs/lib/modules/$kver/modules.order" # none at all when every module is built in
	for f in modules.builtin modules.builtin.modinfo; do
		[ ! -f "$moddir/$f" ] || cp "$moddir/$f" "$fs/lib/modules/$kver/"
	done
	depmod -b "$fs" "$kver" || vm_die "depmod for the initramfs failed"

	printf '%s\n' ${load[@]+"${load[@]}"} >"$fs/etc/srnic-vm-modules"
	printf '%s\n' ${load_nic[@]+"${load_nic[@]}"} >"$fs/etc/srnic-vm-nic-modules"
	vm_initramfs_init | sed "s|@OPTS@|$VM_9P_OPTS|g" >"$fs/init"
	chmod 755 "$fs/init"

	(cd "$fs" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) \
		>"$tmp/initramfs.cpio"
	mv -f "$tmp/initramfs.cpio" "$out"
	rm -rf "$tmp"
}

# vm_module_indexes OUT KVER ROOT KO [COPY]: stage a module tree for the guest in which KO is
# installed as updates/<name>.ko (with srnic_test.ko if built beside it), and run depmod on it here on the host: depmod -a inside the
# guest reads every module over 9p and takes ~30 s under TCG, on the host under a second. OUT
# receives lib/modules/KVER/{modules.*, updates/<name>.ko}: the guest copies that over its own
# /lib/modules/KVER. The symlinks pointing into ROOT's tree are removed afterwards. With COPY=1
# (a module tree the guest's root does not have: vm-run --modules) the whole tree is copied
# instead, and KO may be empty.
vm_module_indexes() {
	local out=$1 kver=$2 root=$3 ko=$4 copy=${5:-0}
	local moddir="${root%/}/lib/modules/$kver" dst="$out/lib/modules/$kver" f
	mkdir -p "$dst/updates"
	if [ "$copy" = 1 ]; then
		cp -a "$moddir/." "$dst/"
		rm -f "$dst/build" "$dst/source"
	else
		for f in "$moddir"/* "$moddir"/updates/*; do
			[ -e "$f" ] || continue
			case "${f#"$moddir"/}" in
			# depmod's outputs, and dirs linked entry by entry.
			modules.dep | modules.dep.bin | modules.alias | modules.alias.bin | \
				modules.symbols | modules.symbols.bin | modules.softdep | modules.devname | \
				modules.builtin.bin | modules.builtin.alias.bin | updates | build | source) ;;
			*) ln -s "$f" "$dst/${f#"$moddir"/}" ;;
			esac
		done
	fi
	if [ -n "$ko" ]; then
		rm -f "$dst/updates/$(basename "$ko")"* "$dst/updates/srnic_test.ko"*
		cp "$ko" "$dst/updates/$(basename "$ko")"
		# The suites' hooks (kernel/test/srnic_test.c), built beside it: modprobe srnic_test.
		[ ! -f "$(dirname "$ko")/srnic_test.ko" ] ||
			cp "$(dirname "$ko")/srnic_test.ko" "$dst/updates/srnic_test.ko"
	fi
	depmod -b "$out" "$kver" || vm_die "depmod of the guest's module tree failed"
	find "$out" -type l -delete
}

# vm_initramfs KVER ROOT CACHEDIR: set VM_INITRAMFS to the path of an up-to-date initramfs,
# building it if missing (a variable, not output: a $(...) subshell would lose VM_CLEANUP on
# failure). The name carries the kernel version, a hash of the root path, and a hash of what
# the image is made of: the root's module index (so a root whose kernel package changed
# rebuilds), busybox and this file, which holds the init script. Stale images of the same
# kernel and root are removed.
vm_initramfs() {
	local kver=$1 root=$2 cachedir=$3 roothash key img f
	roothash=$(printf '%s' "$root" | sha256sum | cut -c 1-8)
	key=$({
		stat -L -c '%n %s %Y' "$root/lib/modules/$kver/modules.dep" /bin/busybox
		cat "${BASH_SOURCE[0]}"
	} 2>/dev/null | sha256sum | cut -c 1-16)
	img="$cachedir/initramfs-$kver-$roothash-$key.cpio"
	if [ ! -f "$img" ]; then
		mkdir -p "$cachedir"
		# Stale images only: a VM beside this one may be booting from this key's.
		for f in "$cachedir/initramfs-$kver-$roothash-"*.cpio; do
			[ "$f" = "$img" ] || rm -f "$f"
		done
		echo "vm-run: building $img" >&2
		vm_build_initramfs "$img" "$kver" "$root"
	fi
	# shellcheck disable=SC2034  # read by vm-run
	VM_INITRAMFS=$img
}
