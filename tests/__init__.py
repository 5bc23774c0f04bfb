"""The probectl test suite: offline tests here, live/ (root and tracefs), guest/ (qemu), fuzz/."""
