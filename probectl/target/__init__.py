"""What is probed: user binaries and libraries (:mod:`.binary`), the kernel and its modules (:mod:`.kernel`)."""
