"""Reading files only: what probes are placed and typed by, never how the kernel is told.

- :mod:`.elf` (headers, segments, sections, notes, separate debug files) with :mod:`.symtab` (symbol
  tables and GNU symbol versions); :mod:`.sdt` (SDT probe notes, ``.note.stapsdt``);
  :mod:`.kallsyms` (the running kernel's symbols);
- :mod:`.dwarf` (DWARF: DIEs, name indexes, lines, locations, call frames, types) and :mod:`.btf`
  (the kernel's BTF), which never import each other;
- what both describe the same way: :mod:`.place` (where a value lives) and :mod:`.typemodel` (the type
  questions the member-chain walker asks, and what the two type models share);
- :mod:`.indexcache`: indexes of large files kept on disk by build-id.
"""
