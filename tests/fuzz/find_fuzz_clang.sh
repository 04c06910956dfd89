#!/usr/bin/env bash
# For the fuzz runners (run_fuzzer.sh, run_cli_fuzzer.sh): prints a clang++ that links libFuzzer
# with the address and undefined-behaviour sanitizers, or exits 77 (ctest's SKIP_RETURN_CODE)
# saying on stderr why there is none here.
# Environment: ZEROJIT_FUZZ_CXX names the clang++ to use.
set -euo pipefail
clang=${ZEROJIT_FUZZ_CXX:-}
if [ -z "$clang" ]; then
  for candidate in clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
    if command -v "$candidate" >/dev/null 2>&1; then clang=$(command -v "$candidate"); break; fi
  done
fi
if [ -z "$clang" ]; then
  echo "SKIPPED: no clang++ found; the fuzzer needs clang with the libFuzzer runtime" \
       "(Debian: apt-get install clang libclang-rt-dev), or set ZEROJIT_FUZZ_CXX" >&2
  exit 77
fi

probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
  >"$probe_dir/probe.cpp"
if ! "$clang" -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cpp" -o "$probe_dir/probe" \
     >"$probe_dir/log" 2>&1; then
  echo "SKIPPED: $clang cannot link -fsanitize=fuzzer,address,undefined (is the libFuzzer" \
       "runtime, e.g. libclang-rt-dev, installed?):" >&2
  cat "$probe_dir/log" >&2
  exit 77
fi
echo "$clang"
