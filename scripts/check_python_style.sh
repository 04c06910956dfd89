#!/usr/bin/env bash
# `ruff check` and `ruff format --check` of the Python package, its tests, the benchmarks and the
# examples, with the rules and line length of pyproject.toml ([tool.ruff]).
#   scripts/check_python_style.sh [RUFF]     (default: ruff on PATH)
# Exit 0: clean; 1: ruff names what is not; 77: no ruff here (scripts/setup.sh puts the pinned
# one in the Python test environment).
set -euo pipefail
ruff=${1:-ruff}
if ! command -v "$ruff" >/dev/null; then
  echo "skipped: no ruff ($ruff); python/tests/requirements.txt pins the one the tests use"
  exit 77
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
"$ruff" check --no-cache .
"$ruff" format --check --no-cache .
