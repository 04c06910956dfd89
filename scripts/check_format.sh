#!/usr/bin/env bash
# Fails, listing the files, when a C++ or CUDA source is not formatted as .clang-format says.
# Uses the clang-format that scripts/setup.sh installs (Debian's clang-format-14), so that every
# machine formats alike.
#   scripts/check_format.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
formatter=$(command -v clang-format-14 || true)
if [ -z "$formatter" ]; then
  echo "zerojit format check: clang-format-14 is missing (scripts/setup.sh installs it)" >&2
  exit 2
fi
unformatted=()
while IFS= read -r -d '' file; do
  "$formatter" --style=file --dry-run -Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done < <(git ls-files -z --cached --others --exclude-standard -- '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
if ((${#unformatted[@]})); then
  echo "zerojit format check: ${#unformatted[@]} file(s) are not clang-format clean:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "fix with: clang-format-14 -i FILE..." >&2
  exit 1
fi
echo "zerojit format check: every source is clang-format clean"
