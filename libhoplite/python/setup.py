"""pip install ./libhoplite/python -- the `hoplite` package (Conduit's object store client).

Building compiles libhoplite.so from this repository with CMake (or takes an existing
one from $HOPLITE_LIBRARY) and ships it inside the package, which then talks to it
through ctypes: no compiled Python extension, so any CPython 3 with numpy works.
"""
import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("HOPLITE_LIBRARY")
        if not lib:
            build = os.environ.get("HOPLITE_BUILD_DIR") or tempfile.mkdtemp(prefix="hoplite-build-")
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DBUILD_TESTING=OFF",
                                   "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
            subprocess.check_call(["cmake", "--build", build, "--target", "hoplite", "-j2"])
            lib = os.path.join(build, "lib", "libhoplite.so")
        shutil.copy(lib, os.path.join(self.build_lib, "hoplite", "libhoplite.so"))


setup(
    name="hoplite",
    version="0.1.0",
    description="Client of Conduit's Hoplite-style distributed object store (served by conduitd)",
    packages=["hoplite"],
    python_requires=">=3.8",
    install_requires=["numpy"],
    cmdclass={"build_py": BuildPyWithLibrary},
    zip_safe=False,
)
