"""The built wheel carries everything an installed probectl needs: subpackages, grammars, the extension."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contains_grammars_subpackages_and_extension(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("probectl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for grammar in ROOT.glob("grammar/*.lark"):
        assert f"probectl/grammar/{grammar.name}" in names
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "probectl").rglob("*.py")}
    assert "probectl/debuginfo/dwarf/__init__.py" in modules
    assert modules - names == set(), "every module of every stage package is installed"
    assert any(n.startswith("probectl/_native") and n.endswith(".so") for n in names)
    assert {"probectl/py.typed", "probectl/_native.pyi"} <= names, "a type checker of an installed probectl sees its types"
