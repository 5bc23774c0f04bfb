#!/usr/bin/env bash
# Download and cache the kernel test data: Debian's cloud kernel with its DWARF vmlinux (-dbg) and
# the matching bootable image (-unsigned), for offline kprobe definitions and the qemu live test.
# Prints the cache directory. Cache: $PROBECTL_KERNEL_CACHE (default /var/cache/probectl/kernel).
#   tools/kernel-testdata.sh [ABI]     e.g. 6.1.0-56-cloud-amd64; default: what the meta-package wants
set -euo pipefail

cache=${PROBECTL_KERNEL_CACHE:-/var/cache/probectl/kernel}
abi=${1:-}
if [ -z "$abi" ]; then
    abi=$(apt-cache depends linux-image-cloud-amd64-dbg 2>/dev/null \
        | sed -n 's/.*Depends: linux-image-\(.*\)-dbg$/\1/p' | head -n1)
    if [ -z "$abi" ]; then
        apt-get update -qq >&2
        abi=$(apt-cache depends linux-image-cloud-amd64-dbg \
            | sed -n 's/.*Depends: linux-image-\(.*\)-dbg$/\1/p' | head -n1)
    fi
fi
[ -n "$abi" ] || { echo "kernel-testdata: cannot tell which cloud kernel to use" >&2; exit 1; }

dir=$cache/$abi
# A few modules: their debug objects in modules/ (for -m tests; perf -m PATH is the oracle) and their
# loadable objects in modules/loadable/ (insmod'ed in the qemu live test).
modules="fs/fat/vfat.ko fs/fat/fat.ko net/ipv4/tcp_diag.ko fs/overlayfs/overlay.ko"

# fetch PACKAGE-SUFFIX... : download those packages of the ABI into $dir/tmp and unpack the wanted paths.
fetch() {
    rm -rf "$dir/tmp"
    mkdir -p "$dir/tmp" "$dir/modules/loadable"
    (
        cd "$dir/tmp"
        for suffix in "$@"; do apt-get download "linux-image-$abi-$suffix" >&2; done
        wanted=('./usr/lib/debug/boot/*' './boot/vmlinuz-*' './boot/config-*' './boot/System.map-*')
        for m in $modules; do
            wanted+=("./usr/lib/debug/lib/modules/$abi/kernel/$m" "./lib/modules/$abi/kernel/$m")
        done
        for deb in ./*.deb; do
            dpkg-deb --fsys-tarfile "$deb" | tar -x --wildcards "${wanted[@]}" 2>/dev/null || true
        done
    )
    for m in $modules; do
        if [ -f "$dir/tmp/lib/modules/$abi/kernel/$m" ]; then
            mv "$dir/tmp/lib/modules/$abi/kernel/$m" "$dir/modules/loadable/"
        fi
    done
}

if [ ! -s "$dir/vmlinux" ] || [ ! -s "$dir/vmlinuz" ] || [ ! -s "$dir/modules/vfat.ko" ]; then
    fetch dbg unsigned
    mv "$dir/tmp/usr/lib/debug/boot/vmlinux-$abi" "$dir/vmlinux"
    mv "$dir/tmp/boot/vmlinuz-$abi" "$dir/vmlinuz"
    mv "$dir/tmp/boot/config-$abi" "$dir/config" 2>/dev/null || true
    mv "$dir/tmp/boot/System.map-$abi" "$dir/System.map" 2>/dev/null || true
    for m in $modules; do mv "$dir/tmp/usr/lib/debug/lib/modules/$abi/kernel/$m" "$dir/modules/"; done
    rm -rf "$dir/tmp"
elif [ ! -s "$dir/modules/loadable/overlay.ko" ]; then
    fetch unsigned  # a cache made before the loadable modules were kept
    rm -rf "$dir/tmp"
fi
echo "$dir"
