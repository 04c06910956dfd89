#!/usr/bin/env bash
# Installs what zerojit builds with (when missing), then configures and builds it.
#   scripts/setup.sh [build-dir [target...]]    (default: build/, every target)
# Both README commands configure the one build folder with the same flags (so running one after
# the other rebuilds nothing they share) and differ only in the targets they build.
# Environment: ZEROJIT_BUILD_TYPE (Release), ZEROJIT_WERROR (ON), ZEROJIT_JOBS (all cores).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
shift || true
targets=("$@")

# Debian packages the build needs; only the missing ones are installed. hiredis and
# redis-server are for the remote cache tier (docs/CACHE.md, "The remote tier"): hiredis is
# loaded at run time (nothing links it; the tool runs without it unless a remote is named),
# redis-server is what its tests start; clang-format and shellcheck are checks of the test command.
packages=(cmake make g++ libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
          libcli11-dev libxxhash-dev python3 python3-dev python3-venv pybind11-dev
          clang-format-14 shellcheck libhiredis-dev redis-server)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "zerojit setup: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Python module's tests pass numpy arrays through DLPack; without numpy they skip.
python3 -c 'import numpy' 2>/dev/null || python3 -m pip install -q --root-user-action=ignore numpy ||
  echo "zerojit setup: warning: no numpy for python3; the Python tests that need it skip" >&2

# The kernel languages the Python tests compile (Triton, CuTeDSL), pinned in
# python/tests/requirements.txt, in a virtual environment of this python3 (the interpreter the
# module is built for); made again only when the pins change. Without it those tests skip,
# saying so.
test_env="$build/python-test-env"
requirements="$root/python/tests/requirements.txt"
# Two tries: a download that arrives damaged (pip then reports a hash mismatch) is gone on the
# next one.
install_test_env() {
  python3 -m venv --clear "$test_env" &&
    "$test_env/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
}
if ! cmp -s "$requirements" "$test_env/requirements.txt" 2>/dev/null; then
  echo "zerojit setup: installing the Python test environment in $test_env" >&2
  if install_test_env ||
    { echo "zerojit setup: trying the install once more" >&2 && install_test_env; }; then
    cp "$requirements" "$test_env/requirements.txt"
  else
    echo "zerojit setup: warning: the Python test environment could not be made; the Triton" \
      "and CuTeDSL tests skip" >&2
  fi
fi

# NVRTC and the CUDA headers come from the CUDA toolkit (not a Debian package). zerojit builds
# without them; compiling kernels needs them at run time.
if ! ls "${CUDA_HOME:-/usr/local/cuda}"/lib64/libnvrtc.so* >/dev/null 2>&1 && ! command -v nvcc >/dev/null; then
  echo "zerojit setup: warning: no CUDA toolkit found (set CUDA_HOME); kernels cannot be compiled" >&2
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${ZEROJIT_BUILD_TYPE:-Release}" \
  -DZEROJIT_WERROR="${ZEROJIT_WERROR:-ON}" -DZEROJIT_PYTHON_TEST_ENV="$test_env" >/dev/null
if ((${#targets[@]})); then
  cmake --build "$build" -j "${ZEROJIT_JOBS:-$(nproc)}" --target "${targets[@]}"
else
  cmake --build "$build" -j "${ZEROJIT_JOBS:-$(nproc)}"
fi
