"""Machine facts: the x86-64 registers (:mod:`.x86_64`) and instruction lengths (:mod:`.x86_insn`).

A leaf package: every layer may import it, and it imports nothing of probectl but the errors."""
