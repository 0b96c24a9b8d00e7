#!/usr/bin/env python3
"""Builds the hoplite wheel from a build tree's libhoplite, checks it and installs it into a
fresh venv (ctest's objects.python_wheel_build, the setup of objects.python_wheel_test).

    build_wheel.py --project SRC/libhoplite/python --library BUILD/lib/libhoplite.so \
                   --version 0.1.0 --out DIR

Steps (any failure exits non-zero with the reason):
  1. `python -m pip wheel --no-deps --no-build-isolation --no-index` on a copy of the project
     (so the source tree gets no build/ or egg-info, and parallel build trees do not share
     one), with HOPLITE_LIBRARY naming the library: the command libhoplite/README.md gives.
  2. The wheel must be hoplite-VERSION-py3-none-<this platform>.whl, its WHEEL file must say
     Root-Is-Purelib: false and carry that one Tag, and hoplite/libhoplite.so must be in it
     (listed in RECORD) with the build tree's library's bytes (symlinks resolved).
  3. `python -m venv --system-site-packages DIR/venv` (the system site only for numpy) and
     `pip install --no-index` of the wheel into it.
  4. From an empty directory, without PYTHONPATH or HOPLITE_LIBRARY and in isolated mode
     (-I: no script or current directory on sys.path), the venv's Python must import hoplite
     from the venv's site-packages and load the libhoplite.so next to it.
The checks of step 2 are first tried on two broken copies of the wheel (library left out,
tagged pure), which they must reject.
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

DEBIAN_HINT = ("(Debian 12: python3-pip, python3-setuptools, python3-wheel, python3-venv and python3-numpy; "
               "tools/install-deps)")


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "HOPLITE_LIBRARY")
           and not k.startswith("PIP_")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1", PIP_NO_INPUT="1",
               PIP_ROOT_USER_ACTION="ignore")
    env.update(extra)
    return env


def run(argv, what, **kwargs):
    print("+ " + " ".join(a if "\n" not in a else "'<script>'" for a in argv), flush=True)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    print(p.stdout, end="", flush=True)
    if p.returncode != 0:
        fail("%s failed (exit %d) %s" % (what, p.returncode, DEBIAN_HINT))
    return p.stdout


def platform_tag():
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def check_wheel(path, version, library_bytes):
    """Raises ValueError naming what is wrong with the wheel at `path`."""
    name = os.path.basename(path)
    parts = name[:-len(".whl")].split("-") if name.endswith(".whl") else []
    if len(parts) != 5:
        raise ValueError("%s is not a NAME-VERSION-PY-ABI-PLATFORM.whl file name" % name)
    dist, ver, py, abi, plat = parts
    tag = "%s-%s-%s" % (py, abi, plat)
    want_tag = "py3-none-" + platform_tag()
    if (dist, ver) != ("hoplite", version):
        raise ValueError("%s: expected hoplite %s" % (name, version))
    if plat == "any":
        raise ValueError("%s is tagged pure (platform 'any') but bundles libhoplite.so" % name)
    if tag != want_tag:
        raise ValueError("%s: tag %s, expected %s (ctypes: no interpreter/ABI tag; the library's platform)"
                         % (name, tag, want_tag))
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        info = "hoplite-%s.dist-info/" % version
        for needed in (info + "WHEEL", info + "METADATA", info + "RECORD", "hoplite/__init__.py"):
            if needed not in names:
                raise ValueError("%s lacks %s" % (name, needed))
        wheel = z.read(info + "WHEEL").decode().splitlines()
        if "Root-Is-Purelib: false" not in wheel:
            raise ValueError("%s: WHEEL does not say Root-Is-Purelib: false: %s" % (name, wheel))
        tags = [l.split(":", 1)[1].strip() for l in wheel if l.startswith("Tag:")]
        if tags != [want_tag]:
            raise ValueError("%s: WHEEL tags %s, expected [%s]" % (name, tags, want_tag))
        metadata = z.read(info + "METADATA").decode().splitlines()
        for line in ("Name: hoplite", "Version: " + version, "Requires-Dist: numpy"):
            if line not in metadata:
                raise ValueError("%s: METADATA lacks %r" % (name, line))
        lib = "hoplite/libhoplite.so"
        if lib not in names:
            raise ValueError("%s does not bundle %s: %s" % (name, lib, sorted(names)))
        member = z.getinfo(lib)
        if (member.external_attr >> 16) & 0o170000 == 0o120000:
            raise ValueError("%s: %s is a symlink, not the library" % (name, lib))
        data = z.read(lib)
        if data[:4] != b"\x7fELF":
            raise ValueError("%s: %s is not an ELF file" % (name, lib))
        if data != library_bytes:
            raise ValueError("%s: %s differs from the build tree's library" % (name, lib))
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record = z.read(info + "RECORD").decode().splitlines()
        if "%s,sha256=%s,%d" % (lib, digest, len(data)) not in record:
            raise ValueError("%s: RECORD does not list %s with its hash and size" % (name, lib))
    return tag


def rewrite(src, dst, drop=(), wheel_edit=None):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            if item.filename in drop:
                continue
            data = zin.read(item.filename)
            if wheel_edit and item.filename.endswith(".dist-info/WHEEL"):
                data = wheel_edit(data.decode()).encode()
            zout.writestr(item, data)


def self_test(wheel, out, version, library_bytes):
    """The checks must reject a wheel without the library and a wheel tagged pure."""
    bad = os.path.join(out, "bad")
    os.makedirs(bad)
    no_lib = os.path.join(bad, os.path.basename(wheel))
    rewrite(wheel, no_lib, drop={"hoplite/libhoplite.so"})
    pure_name = "hoplite-%s-py3-none-any.whl" % version
    pure = os.path.join(bad, pure_name)
    rewrite(wheel, pure, wheel_edit=lambda t: "\n".join(
        "Root-Is-Purelib: true" if l.startswith("Root-Is-Purelib") else
        ("Tag: py3-none-any" if l.startswith("Tag:") else l) for l in t.splitlines()) + "\n")
    pure_body = os.path.join(bad, "pure-body")  # a correct name around a pure WHEEL file
    os.makedirs(pure_body)
    pure_body = os.path.join(pure_body, os.path.basename(wheel))
    shutil.copy(pure, pure_body)
    for path, why in ((no_lib, "no libhoplite.so"), (pure, "a pure tag"), (pure_body, "a pure WHEEL file")):
        try:
            check_wheel(path, version, library_bytes)
        except ValueError as e:
            print("self-test: a wheel with %s is rejected: %s" % (why, e))
            continue
        fail("the wheel checks accepted a wheel with %s" % why)
    shutil.rmtree(bad)


INSPECT = r"""
import importlib.util, json, os, sys, sysconfig
spec = importlib.util.find_spec("hoplite")
info = {"prefix": sys.prefix, "platlib": sysconfig.get_paths()["platlib"], "origin": spec and spec.origin,
        "path": sys.path}
try:
    import numpy
except ImportError:
    numpy = None
if numpy is not None:
    import hoplite
    info["file"] = hoplite.__file__
    info["lib"] = hoplite._lib._name
print(json.dumps(info))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", required=True, help="libhoplite/python")
    ap.add_argument("--library", required=True, help="the build tree's libhoplite.so")
    ap.add_argument("--version", required=True, help="the version the wheel must have")
    ap.add_argument("--out", required=True, help="scratch directory (emptied first)")
    args = ap.parse_args()
    py = sys.executable
    out = os.path.abspath(args.out)
    project = os.path.abspath(args.project)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    library = os.path.realpath(args.library)
    if not os.path.isfile(library):
        fail("no library at %s" % args.library)
    with open(library, "rb") as f:
        library_bytes = f.read()

    # 1. The wheel.
    src = os.path.join(out, "src")
    shutil.copytree(project, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"))
    dist = os.path.join(out, "dist")
    run([py, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", dist, src],
        "pip wheel", env=clean_env(HOPLITE_LIBRARY=args.library), cwd=out)
    wheels = [f for f in os.listdir(dist) if f.endswith(".whl")]
    if len(wheels) != 1:
        fail("expected one wheel in %s, found %s" % (dist, wheels))
    wheel = os.path.join(dist, wheels[0])

    # 2. Its name, tags and contents.
    try:
        tag = check_wheel(wheel, args.version, library_bytes)
    except ValueError as e:
        fail(str(e))
    print("wheel %s: tag %s, Root-Is-Purelib: false, bundles hoplite/libhoplite.so (%d bytes)"
          % (wheels[0], tag, len(library_bytes)), flush=True)
    self_test(wheel, out, args.version, library_bytes)

    # 3. A fresh venv with the wheel installed.
    venv = os.path.join(out, "venv")
    run([py, "-m", "venv", "--system-site-packages", venv], "python3 -m venv", env=clean_env())
    vpy = os.path.join(venv, "bin", "python")
    has_numpy = subprocess.run([vpy, "-I", "-c", "import numpy"], env=clean_env(), cwd=out,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    # With numpy in the system site, pip resolves the wheel's dependency from it (no index).
    install = [vpy, "-m", "pip", "install", "--no-index"] + ([] if has_numpy else ["--no-deps"]) + [wheel]
    run(install, "pip install of the wheel into the venv", env=clean_env(), cwd=out)

    # 4. What the venv's Python imports, from an empty directory.
    empty = os.path.join(out, "cwd")
    os.makedirs(empty)
    info = json.loads(run([vpy, "-I", "-c", INSPECT], "import hoplite in the venv", env=clean_env(),
                          cwd=empty).strip().splitlines()[-1])
    real = os.path.realpath
    platlib = real(info["platlib"])
    if real(info["prefix"]) != real(venv):
        fail("the venv's sys.prefix is %s, not %s" % (info["prefix"], venv))
    if platlib != real(venv) and not platlib.startswith(real(venv) + os.sep):
        fail("the venv's platlib %s is outside the venv" % platlib)
    if not info["origin"] or real(os.path.dirname(os.path.dirname(info["origin"]))) != platlib:
        fail("hoplite resolves to %s, not the venv's site-packages %s (sys.path %s)"
             % (info["origin"], platlib, info["path"]))
    if "file" in info:
        pkg = real(os.path.dirname(info["file"]))
        if real(info["lib"]) != os.path.join(pkg, "libhoplite.so"):
            fail("hoplite loaded %s, not the libhoplite.so it bundles (%s)" % (info["lib"], pkg))
        print("venv %s: hoplite imported from %s, library %s" % (venv, info["file"], info["lib"]))
    else:
        print("venv %s: hoplite found at %s (no numpy: not imported; objects.python_wheel_test skips)"
              % (venv, info["origin"]))
    print("OK")


if __name__ == "__main__":
    main()
