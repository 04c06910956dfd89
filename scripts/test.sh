#!/usr/bin/env bash
# Sets up, checks the formatting and the tree (scripts/check_tree.sh), builds (warnings as
# errors) and runs every test. GPU tests (label gpu) skip, saying why, on a machine without a GPU.
#   scripts/test.sh [ctest arguments...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" "$root/build"
"$root/scripts/check_format.sh"
"$root/scripts/check_tree.sh"
cd "$root/build"
ctest --output-on-failure --timeout 1200 -j "$(nproc)" "$@"
