#!/usr/bin/env bash
# Sets up and builds the zerojit tool (only the tool: no tests, no benchmarks), then runs it
# (default: its main job, `warmup`).
#   scripts/zerojit.sh [command and options...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh" "$root/build" zerojit_tool >&2
if (($# == 0)); then set -- warmup; fi
exec "$root/build/tools/zerojit" "$@"
