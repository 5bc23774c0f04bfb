"""Pictures of recordings: flame graphs and off-CPU flame graphs (SVG), latency heat maps (SVG), and
recordings as Chrome JSON traces for timeline viewers (Perfetto, chrome://tracing).

The flow: stacks (folded text, or a recording made with ``-g``) → :mod:`.stacks` weighted stacks (or
:mod:`.offcpu` blocked time per stack) → :mod:`.flamegraph` SVG; latency pairs → :mod:`.heatmap` SVG;
a recording → :mod:`.timeline` JSON. A file named with ``-o`` is written whole or not at all
(:mod:`probectl.outputfile`).
"""
