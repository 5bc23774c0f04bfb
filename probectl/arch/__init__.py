"""Machine facts: x86-64 instruction lengths (:mod:`.x86_insn`)."""
