"""Debian's cloud kernel booted in qemu for the guest tests (tests/guest/), as drgn keeps its VM tooling
in a top-level vmtest/: the kernel has kprobes, hist triggers and synthetic events, which this machine's
kernel lacks. Not part of the installed package.

- :mod:`vmtest.busybox_guest`: the kernel test data, and a busybox initramfs that writes kprobe
  definitions and triggers itself and reports what the kernel did;
- :mod:`vmtest.probectl_guest`: the same kernel with this checkout's probectl on board, running
  shell steps. README.md here tells how both work.
"""
