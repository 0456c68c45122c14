"""The PEP 517 build backend of python/pyproject.toml: nothing from PyPI, the standard library only.

It builds the _core extension with the repository's CMake project for the interpreter that runs it
(its headers, its extension suffix), then writes a wheel: the package's files from python/openautoglm,
the extension, and the .dist-info (METADATA, WHEEL with this interpreter's tag, RECORD with hashes).

Where the build happens:
  AUTOGLM_BUILD_DIR=DIR  an existing configured build folder of this repository, reused as is (only
                         `cmake --build DIR --target _core`, never reconfigured) when its Python's
                         extension suffix equals this interpreter's; otherwise (a message says so):
  build/python-<suffix>  a folder of its own per extension ABI (e.g. build/python-cpython-311-x86_64-linux-gnu),
                         configured once (Release, no tests) for this interpreter, plus AUTOGLM_CMAKE_ARGS.
AUTOGLM_BUILD_LOCK=FILE holds flock(FILE) while CMake configures and builds.
"""
import base64
import contextlib
import csv
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile

_PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
_ROOT = os.path.dirname(_PYTHON_DIR)  # the repository
_PACKAGE = "openautoglm"


def _log(message):
    print(f"openautoglm build: {message}", file=sys.stderr, flush=True)


def _fail(message):
    raise RuntimeError(f"openautoglm build: {message}")


# ---- metadata ----------------------------------------------------------------------------------

def _version():
    with open(os.path.join(_ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*\w+\s+VERSION\s+([0-9][0-9A-Za-z.]*)", f.read())
    if not m:
        _fail(f"no project(... VERSION x.y.z) in {_ROOT}/CMakeLists.txt")
    return m.group(1)


def _project():
    with open(os.path.join(_PYTHON_DIR, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {_version()}"]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    return "\n".join(lines) + "\n"


def _tag():
    """cp311-cp311-linux_x86_64 for this interpreter (the extension is for its ABI only)."""
    soabi = sysconfig.get_config_var("SOABI") or ""
    if sys.implementation.name != "cpython" or not soabi.startswith("cpython-"):
        _fail(f"CPython only (this is {sys.implementation.name}, SOABI {soabi!r})")
    interpreter = f"cp{sys.version_info.major}{sys.version_info.minor}"
    abi = "cp" + soabi.split("-")[1]  # 311, or 311d / 313t for debug and free-threaded builds
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{interpreter}-{abi}-{platform}"


def _dist_info_name():
    return f"{_project()['name']}-{_version()}.dist-info"


def _wheel_file(tag):
    return f"Wheel-Version: 1.0\nGenerator: openautoglm_build\nRoot-Is-Purelib: false\nTag: {tag}\n"


# ---- the extension -----------------------------------------------------------------------------

def _ext_suffix():
    return sysconfig.get_config_var("EXT_SUFFIX")


def _base_interpreter():
    """The interpreter itself, not a venv's link to it: a build folder outlives the venv."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(exe)


def _cache(build_dir):
    values = {}
    with open(os.path.join(build_dir, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"([A-Za-z_][\w.+-]*):\w+=(.*)$", line.rstrip("\n"))
            if m:
                values[m.group(1)] = m.group(2)
    return values


def _suffix_of(python):
    if not python or not os.path.exists(python):
        return None
    r = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


@contextlib.contextmanager
def _build_lock():
    path = os.environ.get("AUTOGLM_BUILD_LOCK")
    if not path:
        yield
        return
    import fcntl

    with open(path, "a") as f:
        _log(f"waiting for the build lock {path}")
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd):
    _log("$ " + shlex.join(cmd))
    # CMake's output goes to stderr: pip shows it with -v, or when the build fails.
    r = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0:
        _fail(f"{shlex.join(cmd)} exited with {r.returncode}")


def _reusable(build_dir, suffix):
    """Whether AUTOGLM_BUILD_DIR can serve this interpreter as is; logs why not."""
    if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
        _fail(f"AUTOGLM_BUILD_DIR={build_dir}: no CMakeCache.txt there (a configured build folder of {_ROOT})")
    cache = _cache(build_dir)
    home = cache.get("CMAKE_HOME_DIRECTORY", "")
    if os.path.realpath(home) != os.path.realpath(_ROOT):
        _fail(f"AUTOGLM_BUILD_DIR={build_dir} builds {home or 'an unknown source'}, not {_ROOT}")
    if cache.get("AUTOGLM_PYTHON", "ON").upper() in ("OFF", "0", "FALSE", "NO"):
        _log(f"AUTOGLM_BUILD_DIR={build_dir} was configured with AUTOGLM_PYTHON=OFF: not reused")
        return False
    theirs = cache.get("Python_EXECUTABLE", "")
    their_suffix = _suffix_of(theirs)
    if their_suffix != suffix:
        _log(f"AUTOGLM_BUILD_DIR={build_dir} builds for {theirs} ({their_suffix}), not this interpreter's "
             f"{suffix}: not reused")
        return False
    _log(f"reusing AUTOGLM_BUILD_DIR={build_dir} as is: its Python ({theirs}) has this interpreter's "
         f"extension suffix {suffix}")
    return True


def _own_build_dir(suffix):
    tag = suffix.strip(".").removesuffix(".so").removesuffix(".pyd")
    build_dir = os.path.join(_ROOT, "build", f"python-{tag}")
    interpreter = _base_interpreter()
    cache_file = os.path.join(build_dir, "CMakeCache.txt")
    configured = os.path.isfile(cache_file) and _suffix_of(_cache(build_dir).get("Python_EXECUTABLE")) == suffix
    if configured:
        _log(f"building in {build_dir} (configured for {_cache(build_dir)['Python_EXECUTABLE']}, extension suffix {suffix})")
        return build_dir
    _log(f"configuring {build_dir} for {interpreter} (extension suffix {suffix})")
    cmd = ["cmake", "-S", _ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release", "-DAUTOGLM_TESTS=OFF",
           "-DAUTOGLM_PYTHON=ON", f"-DPython_EXECUTABLE={interpreter}"]
    if not os.path.isfile(cache_file) and shutil.which("ninja"):
        cmd += ["-G", "Ninja"]
    cmd += shlex.split(os.environ.get("AUTOGLM_CMAKE_ARGS", ""))
    _run(cmd)
    return build_dir


def _build_extension():
    """Builds _core for this interpreter; returns the extension's path."""
    for tool in ("cmake",):
        if not shutil.which(tool):
            _fail(f"{tool} is not on PATH (Debian: bash scripts/install-deps.sh --build-only)")
    if not os.path.isfile(os.path.join(_ROOT, "CMakeLists.txt")) or not os.path.isdir(os.path.join(_ROOT, "include", "autoglm")):
        _fail(f"{_PYTHON_DIR} must sit in an Open-AutoGLM checkout: the extension builds with its CMake project")
    suffix = _ext_suffix()
    with _build_lock():
        build_dir = os.environ.get("AUTOGLM_BUILD_DIR")
        if build_dir:
            build_dir = os.path.abspath(build_dir)
            if not _reusable(build_dir, suffix):
                build_dir = None
        if not build_dir:
            build_dir = _own_build_dir(suffix)
        cmd = ["cmake", "--build", build_dir, "--target", "_core"]
        if os.environ.get("AUTOGLM_BUILD_JOBS"):
            cmd += ["-j", os.environ["AUTOGLM_BUILD_JOBS"]]
        _run(cmd)
    ext = os.path.join(build_dir, "python", _PACKAGE, "_core" + suffix)
    if not os.path.isfile(ext):
        _fail(f"the build left no {ext}")
    _log(f"extension: {ext}")
    return ext


# ---- the wheel ---------------------------------------------------------------------------------

def _package_files():
    src = os.path.join(_PYTHON_DIR, _PACKAGE)
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if os.path.isfile(path) and not name.startswith("_core.") and not name.endswith((".pyc", ".so")):
            yield f"{_PACKAGE}/{name}", path


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(wheel_directory, ext):
    tag = _tag()
    name = f"{_project()['name']}-{_version()}-{tag}.whl"
    dist_info = _dist_info_name()
    entries = [(arc, open(path, "rb").read()) for arc, path in _package_files()]
    entries.append((f"{_PACKAGE}/{os.path.basename(ext)}", open(ext, "rb").read()))
    entries.append((f"{dist_info}/METADATA", _metadata().encode()))
    entries.append((f"{dist_info}/WHEEL", _wheel_file(tag).encode()))
    entries.append((f"{dist_info}/top_level.txt", f"{_PACKAGE}\n".encode()))
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for arc, data in entries:
        writer.writerow([arc, _record_hash(data), len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    entries.append((f"{dist_info}/RECORD", record.getvalue().encode()))
    os.makedirs(wheel_directory, exist_ok=True)
    path = os.path.join(wheel_directory, name)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            info = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o755 if arc.endswith(".so") else 0o644) << 16
            z.writestr(info, data)
    _log(f"wrote {path}")
    return name


# ---- PEP 517 hooks -----------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = _dist_info_name()
    path = os.path.join(metadata_directory, dist_info)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(path, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file(_tag()))
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _build_extension())

# No build_sdist: the extension builds with the whole repository's CMake project, so a source
# distribution of python/ alone could not build; install from the checkout (pip builds in place).
