#!/usr/bin/env bash
# Checks that zerojit's Python wheel is manylinux_2_28 compatible, with `auditwheel show`
# (auditwheel from PyPI, installed into a virtual environment of WORK_DIR, kept for the next run).
#   scripts/check_wheel.sh BUILD_DIR WORK_DIR   the wheel packed from BUILD_DIR's Python package
#   scripts/check_wheel.sh --pip WORK_DIR       the wheel `pip wheel .` builds from this tree
# The first is what the test python_wheel runs: `pip wheel .` builds the module again from
# scratch (minutes on a small machine), while auditwheel judges only the ELF files a wheel holds
# (the module, which carries the tool: its glibc symbol versions and the libraries it needs),
# and that is what BUILD_DIR built with the same CMakeLists.txt, the same options (the glibc
# floor, the static C++ runtime) and the same compiler. So the module of BUILD_DIR is packed
# into a wheel laid out as pip's is (the package; the `zerojit` command is a console script,
# pyproject.toml, which holds no ELF file), and that wheel is judged. The second builds the real
# wheel, for a release.
# Exit 0: compatible with manylinux_2_28 or an older policy; 1: not, with auditwheel's report;
# 77: cannot check here (no Python package in BUILD_DIR, or auditwheel cannot be installed).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage="usage: check_wheel.sh BUILD_DIR WORK_DIR | --pip WORK_DIR"
mode=pack
if [ "${1:-}" = "--pip" ]; then
  mode=pip
  shift
  work=${1:?$usage}
else
  build=$(cd "${1:?$usage}" && pwd)
  work=${2:?$usage}
fi
mkdir -p "$work"
python=${PYTHON:-python3}

# auditwheel, once per WORK_DIR.
venv=$work/venv
if [ ! -x "$venv/bin/auditwheel" ]; then
  rm -rf "$venv"
  if ! "$python" -m venv "$venv" ||
    ! "$venv/bin/pip" install --quiet --disable-pip-version-check auditwheel; then
    echo "skipped: cannot install auditwheel from PyPI into $venv"
    exit 77
  fi
fi

dist=$work/dist
rm -rf "$dist"
mkdir -p "$dist"
if [ "$mode" = pip ]; then
  "$venv/bin/pip" wheel --no-deps --disable-pip-version-check -w "$dist" "$root"
else
  package=$build/python/zerojit
  if ! ls "$package"/_core*.so >/dev/null 2>&1; then
    echo "skipped: $build built no Python module"
    exit 77
  fi
  # A wheel as pip builds it (pyproject.toml: the package python/zerojit with the module next to
  # its files): every file, its RECORD, its WHEEL tag.
  "$python" - "$package" "$dist" <<'EOF'
import base64, hashlib, pathlib, sys, sysconfig, zipfile
package, dist = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
tag = "cp%d%d" % sys.version_info[:2]
platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
name = "zerojit-0.1.0"
files = {f"zerojit/{p.relative_to(package)}": p.read_bytes()
         for p in sorted(package.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
files[f"{name}.dist-info/METADATA"] = b"Metadata-Version: 2.1\nName: zerojit\nVersion: 0.1.0\n"
files[f"{name}.dist-info/WHEEL"] = (
    f"Wheel-Version: 1.0\nGenerator: zerojit check_wheel.sh\nRoot-Is-Purelib: false\n"
    f"Tag: {tag}-{tag}-{platform}\n").encode()
record = []
for path, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(data)}")
record.append(f"{name}.dist-info/RECORD,,")
files[f"{name}.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
wheel = dist / f"{name}-{tag}-{tag}-{platform}.whl"
with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
    for path, data in files.items():
        info = zipfile.ZipInfo(path)
        info.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
        archive.writestr(info, data, zipfile.ZIP_DEFLATED)
print(f"packed {wheel.name}: {len(files)} files")
EOF
fi

wheel=$(ls "$dist"/*.whl)
report=$("$venv/bin/auditwheel" show "$wheel" 2>&1) || {
  echo "$report"
  echo "auditwheel could not read $wheel" >&2
  exit 1
}
echo "$report"
# "... is consistent with the following platform tag: "manylinux_2_28_x86_64"." (the best
# policy the wheel meets; the words wrap differently between auditwheel versions).
tag=$(tr '\n' ' ' <<<"$report" | grep -o 'following platform tag: *"[^"]*"' | grep -o '"[^"]*"' |
      tr -d '"' || true)
case "$tag" in
  manylinux_2_*)
    minor=${tag#manylinux_2_}
    minor=${minor%%_*}
    ;;
  manylinux2014_* | manylinux2010_* | manylinux1_*) minor=17 ;;
  *) minor="" ;;
esac
if [ -z "$minor" ] || [ "$minor" -gt 28 ]; then
  echo "FAIL: $(basename "$wheel") is not manylinux_2_28 compatible (best policy: ${tag:-none})" >&2
  exit 1
fi
echo "ok: $(basename "$wheel") is $tag compatible (the floor is manylinux_2_28)"
