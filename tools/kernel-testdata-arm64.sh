#!/usr/bin/env bash
# Download and cache what the AArch64 guest boots: Debian's arm64 cloud kernel (the bootable image of
# its -unsigned package, with its config, and its vmlinux with DWARF from the -dbg package, 262 MB, for
# kprobe definitions made on the host) and busybox-static for arm64, from Debian's
# arm64 packages (the arm64 architecture is added to dpkg if it is not there). Prints the cache
# directory. Cache: $PROBECTL_ARM64_KERNEL_CACHE (default /var/cache/probectl/kernel-arm64).
#   tools/kernel-testdata-arm64.sh [ABI]     e.g. 6.1.0-56-cloud-arm64; default: what the meta-package wants
set -euo pipefail

cache=${PROBECTL_ARM64_KERNEL_CACHE:-/var/cache/probectl/kernel-arm64}
abi=${1:-}

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    apt-get update -qq >&2
fi
if [ -z "$abi" ]; then
    abi=$(apt-cache depends linux-image-cloud-arm64:arm64 2>/dev/null \
        | sed -n 's/.*Depends: linux-image-\(.*\):arm64$/\1/p' | head -n1)
    if [ -z "$abi" ]; then
        apt-get update -qq >&2
        abi=$(apt-cache depends linux-image-cloud-arm64:arm64 \
            | sed -n 's/.*Depends: linux-image-\(.*\):arm64$/\1/p' | head -n1)
    fi
fi
[ -n "$abi" ] || { echo "kernel-testdata-arm64: cannot tell which arm64 cloud kernel to use" >&2; exit 1; }

dir=$cache/$abi
if [ ! -s "$dir/vmlinuz" ] || [ ! -s "$dir/busybox" ] || [ ! -s "$dir/vmlinux" ]; then
    rm -rf "$dir/tmp"
    mkdir -p "$dir/tmp"
    (
        cd "$dir/tmp"
        apt-get download "linux-image-$abi-unsigned:arm64" "linux-image-$abi-dbg:arm64" "busybox-static:arm64" >&2
        for deb in ./*.deb; do
            dpkg-deb --fsys-tarfile "$deb" | tar -x --wildcards './boot/vmlinuz-*' './boot/config-*' './bin/busybox' \
                './usr/lib/debug/boot/vmlinux-*' 2>/dev/null || true
        done
    )
    mv "$dir/tmp/boot/vmlinuz-$abi" "$dir/vmlinuz"
    mv "$dir/tmp/boot/config-$abi" "$dir/config"
    mv "$dir/tmp/bin/busybox" "$dir/busybox"
    mv "$dir/tmp/usr/lib/debug/boot/vmlinux-$abi" "$dir/vmlinux"
    rm -rf "$dir/tmp"
fi
echo "$dir"
