#!/usr/bin/env bash
# Set up probectl on Debian 12 (as root): system packages, a virtualenv in .venv, probectl installed in it.
#   tools/bootstrap.sh          what probectl itself needs
#   tools/bootstrap.sh --test   also the test oracles and targets (perf, trace-cmd, qemu, libc6-dbg, busybox)
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(gcc python3-dev python3-venv)
if [ "${1:-}" = "--test" ]; then
    pkgs+=(linux-perf trace-cmd libc6-dbg busybox-static qemu-system-x86 zstd)
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

python3 -m venv .venv
extra=""
[ "${1:-}" = "--test" ] && extra="[test]"
.venv/bin/pip install -q --disable-pip-version-check -e ".${extra}"

if [ "${1:-}" = "--test" ]; then
    # The kernel-probe tests read Debian's cloud vmlinux and boot its kernel in qemu; fetch them once.
    tools/kernel-testdata.sh >/dev/null
fi

if ! grep -q ' tracefs ' /proc/mounts && [ -d /sys/kernel/tracing ]; then
    mount -t tracefs nodev /sys/kernel/tracing || true
fi
