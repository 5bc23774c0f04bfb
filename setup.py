"""Build glue that pyproject.toml cannot express: the native extension and the grammar files.

The grammars live in grammar/ at the top of the tree (design.md's layout) but must ship inside the
installed package, so build_py copies them into probectl/grammar/ of the build.
"""
import glob
import os

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithGrammars(build_py):
    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "probectl", "grammar")
        self.mkpath(target)
        for path in sorted(glob.glob(os.path.join(HERE, "grammar", "*.lark"))):
            self.copy_file(path, os.path.join(target, os.path.basename(path)))


native_sources = sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, "native", "*.c")))
ext_modules = []
if native_sources:
    ext_modules.append(
        Extension(
            "probectl._native",
            sources=native_sources,
            include_dirs=["native"],
            extra_compile_args=["-std=gnu99", "-O2", "-Wall", "-Wextra"],
        )
    )

setup(cmdclass={"build_py": BuildWithGrammars}, ext_modules=ext_modules)
