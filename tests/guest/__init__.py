"""Tests that boot a kernel in qemu (vmtest/)."""
