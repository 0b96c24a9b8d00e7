"""The build step of the `hoplite` package; its metadata is in pyproject.toml.

This file stays because the setuptools backend has no declarative way to do two things the
package needs:
  * build_py also puts libhoplite.so into the package: compiled from this repository with
    CMake (Release), or copied from $HOPLITE_LIBRARY (an existing build's library);
  * the wheel is platform-tagged (py3-none-<platform>, Root-Is-Purelib: false) since it
    carries that native library. The package talks to it through ctypes, so there is no
    CPython extension and no interpreter or ABI tag: any CPython 3 with numpy loads it.
"""
import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:
    from wheel.bdist_wheel import bdist_wheel  # older setuptools (Debian 12: 66) with `wheel`

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LIBRARY = "libhoplite.so"  # the name hoplite/__init__.py loads from its own directory


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("HOPLITE_LIBRARY")
        if lib and not os.path.isabs(lib):
            # pip runs this in a copy or in this directory, not where the command was typed.
            raise RuntimeError("HOPLITE_LIBRARY must be an absolute path, not %r" % lib)
        if not lib:
            build = os.environ.get("HOPLITE_BUILD_DIR") or tempfile.mkdtemp(prefix="hoplite-build-")
            # Only libhoplite: the other components (and their dependencies) are left out.
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DBUILD_TESTING=OFF", "-DCONDUIT_BUILD_GRPC=OFF", "-DCONDUIT_BUILD_NCCL=OFF",
                                   "-DCONDUIT_BUILD_TOOLS=OFF"])
            subprocess.check_call(["cmake", "--build", build, "--target", "hoplite",
                                   "-j%d" % min(os.cpu_count() or 1, 8)])
            lib = os.path.join(build, "lib", LIBRARY)
        # libhoplite.so may be the development symlink to libhoplite.so.0 -> libhoplite.so.0.1.0:
        # the package gets the real file, under the name it loads.
        real = os.path.realpath(lib)
        if not os.path.isfile(real):
            raise RuntimeError("libhoplite not found at %s (HOPLITE_LIBRARY)" % lib)
        dest = os.path.join(self.build_lib, "hoplite", LIBRARY)
        if os.path.lexists(dest):
            os.remove(dest)
        shutil.copyfile(real, dest)
        os.chmod(dest, 0o755)


class BinaryDistribution(Distribution):
    """Carries a native library: installed into platlib, never treated as pure."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """py3-none-<platform>: the platform of the bundled library, no interpreter/ABI tag."""

    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel}, distclass=BinaryDistribution)
