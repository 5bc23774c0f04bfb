#!/usr/bin/env bash
# Set up probectl on Debian 12 (as root): system packages, a virtualenv in .venv, probectl installed in it.
#   tools/bootstrap.sh          what probectl itself needs
#   tools/bootstrap.sh --test   also the test oracles and targets (perf, trace-cmd, qemu, libc6-dbg, busybox,
#                               <sys/sdt.h> for the USDT fixtures, a debuginfod server, chromium for the pictures,
#                               podman and runc for the containers of a real runtime, an AArch64 cross
#                               compiler for the fixtures' AArch64 builds, qemu-system-aarch64 and Debian's
#                               arm64 cloud kernel for the AArch64 guest, and Debian's arm64 Python for
#                               probectl run there)
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(gcc python3-dev python3-venv)
if [ "${1:-}" = "--test" ]; then
    pkgs+=(linux-perf trace-cmd libc6-dbg busybox-static qemu-system-x86 e2fsprogs zstd systemtap-sdt-dev
           debuginfod chromium golang-go g++ rustc libstdc++6-12-dbg podman runc gcc-aarch64-linux-gnu
           libc6-dev-arm64-cross qemu-system-arm)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "bootstrap: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Debian's own interpreter, the one python3-dev and python3-venv above are for (and an optimised
# build: a probectl command starts faster on it than on a plain source build of the same version;
# docs/ledger.md, "Set-up"). A python3 found first on $PATH (pyenv, a local build) is used only when
# there is none.
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3)
if [ -e .venv/pyvenv.cfg ] && ! grep -qx "home = $(dirname "$(readlink -f "$python")")" .venv/pyvenv.cfg; then
    echo "bootstrap: .venv was made by another interpreter; making it again with $python" >&2
    rm -rf .venv
fi
"$python" -m venv .venv
extra=""
[ "${1:-}" = "--test" ] && extra="[test]"
# editable_mode=compat: a plain path in a .pth file. setuptools' default (strict) installs an import
# finder that site imports at every interpreter start, with pathlib, re and urllib behind it, before
# each probectl command's first line runs (docs/ledger.md, "Set-up").
.venv/bin/pip install -q --disable-pip-version-check -e ".${extra}" --config-settings editable_mode=compat
# Byte-compiled now, as pip compiles a package it installs from a wheel: an editable install leaves it to
# the first import, which never writes it where PYTHONDONTWRITEBYTECODE is set (it is on some CI machines),
# and then every command compiles the modules it imports again (docs/ledger.md, "Set-up").
.venv/bin/python -m compileall -q probectl >/dev/null

if [ "${1:-}" = "--test" ]; then
    # The kernel-probe tests read Debian's cloud vmlinux and boot its kernel in qemu; fetch them once.
    tools/kernel-testdata.sh >/dev/null
    tools/kernel-testdata-arm64.sh >/dev/null  # (adds arm64 to dpkg's architectures for apt-get download)
    tools/python-arm64.sh >/dev/null  # the AArch64 guest's Python, for probectl run there
fi

if ! grep -q ' tracefs ' /proc/mounts && [ -d /sys/kernel/tracing ]; then
    mount -t tracefs nodev /sys/kernel/tracing || true
fi
