"""probectl's tests, in folders by what they need (`pytest -q tests` runs them all):

- ``tests/``: offline (the fixture programs built with gcc, the committed data in ``data/``, the
  oracles perf, trace-cmd, readelf and pyelftools where installed), and three tests of the tree
  itself: ``test_layout`` (the import direction), ``test_imports`` (what each command loads) and
  ``test_readme_tour`` (the README's examples, live where they trace);
- ``live/``: root and this machine's tracefs, behind the ``live_tracefs`` fixture (marker ``root``);
- ``guest/``: Debian's cloud kernel booted in qemu by ``vmtest/`` (marker ``qemu``);
- ``fuzz/``: the fuzz pass and the defects it found.

``helpers.py`` holds what the modules share: the probectl runner, the gates that skip (or, under
PROBECTL_REQUIRE_ALL=1, fail) a test this machine cannot run, and the fixture builders. The
conftest.py files hold only fixtures and hooks. ``-m 'not root and not qemu'`` is a run without
tracefs or qemu.
"""
