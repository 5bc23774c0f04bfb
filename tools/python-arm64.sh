#!/usr/bin/env bash
# Download and cache what probectl runs on in the AArch64 guest: Debian's arm64 Python 3.11 (the
# interpreter, its standard library and extension modules), the shared libraries those load, and the
# headers the native extension is cross-compiled against (libpython3.11-dev's, with the aarch64
# pyconfig.h), all from Debian's arm64 packages (arm64 is added to dpkg's architectures if it is not
# there). The packages are unpacked into one merged-/usr tree ($dir/root: /lib's files under /usr/lib)
# and the standard library is byte-compiled here, with this machine's python3.11 (the same bytecode:
# compiling it under TCG would take minutes at every start). Prints the cache directory.
# Cache: $PROBECTL_ARM64_PYTHON_CACHE (default /var/cache/probectl/python-arm64)/VERSION.
#
# Left out (no command of probectl's imports their modules): libsqlite3 (_sqlite3), libreadline and
# ncurses (readline, curses), libdb (_dbm), libcrypt (_crypt), libnsl and libtirpc (nis).
set -euo pipefail

cache=${PROBECTL_ARM64_PYTHON_CACHE:-/var/cache/probectl/python-arm64}
packages=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libpython3.11-dev libc6 libexpat1 zlib1g
          libffi8 libssl3 libbz2-1.0 liblzma5 libuuid1 libzstd1)

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    apt-get update -qq >&2
fi
version() { apt-cache show --no-all-versions python3.11-minimal:arm64 2>/dev/null | sed -n 's/^Version: //p' | head -n1; }
v=$(version)
if [ -z "$v" ]; then
    apt-get update -qq >&2
    v=$(version)
fi
[ -n "$v" ] || { echo "python-arm64: apt knows no python3.11-minimal:arm64" >&2; exit 1; }

dir=$cache/$v
if [ ! -e "$dir/complete" ]; then
    rm -rf "$dir"
    mkdir -p "$dir/debs" "$dir/root"
    (cd "$dir/debs" && apt-get download "${packages[@]/%/:arm64}" >&2)
    for deb in "$dir"/debs/*.deb; do
        dpkg-deb -x "$deb" "$dir/root"
    done
    # merged /usr, as the guest's image has it (its /lib is a link to /usr/lib)
    for top in lib lib64; do
        if [ -d "$dir/root/$top" ] && [ ! -L "$dir/root/$top" ]; then
            cp -a "$dir/root/$top/." "$dir/root/usr/$top/"
            rm -rf "${dir:?}/root/$top"
        fi
    done
    find "$dir/root" -name "*.a" -delete  # (the static libpython of -dev: 40 MB nobody links)
    rm -rf "$dir/root/usr/share/doc" "$dir/root/usr/share/man" "$dir/root/usr/share/locale" "$dir/debs"
    python3.11 -m compileall -q -s "$dir/root" -p / "$dir/root/usr/lib/python3.11" >/dev/null || true
    touch "$dir/complete"
fi
echo "$dir"
