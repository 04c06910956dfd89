#!/usr/bin/env bash
# The tree's own checks, run by the test command beside the format check:
#   * no source file over 700 lines outside the tests (a file a reader can hold);
#   * every repository path named in the sources and docs exists (scripts/check_paths.py);
#   * no file of src/ or include/ names a kernel language outside the language table (its
#     folders src/languages/ and include/zerojit/language.hpp): the core asks an entry kind;
#   * shellcheck of every tracked shell script.
#   scripts/check_tree.sh        (exit 0: all hold; 1: each failure named)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
status=0

max_lines=700
long=$(git ls-files -- '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh' '*.py' '*.pyi' '*.sh' '*.cmake' \
         ':!tests/' ':!python/tests/' | xargs wc -l | awk -v max="$max_lines" \
         '$2 != "total" && $1 > max { print "  " $2 ": " $1 " lines" }')
if [ -n "$long" ]; then
  echo "zerojit tree check: files over $max_lines lines outside the tests:" >&2
  echo "$long" >&2
  status=1
fi

python3 scripts/check_paths.py || status=1

named=$(git grep -n -E 'Language::(cuda|triton|cutedsl)' -- src include \
          ':!src/languages/' ':!include/zerojit/language.hpp' || true)
if [ -n "$named" ]; then
  echo "zerojit tree check: a language named outside the language table (ask its entry kind):" >&2
  while IFS= read -r line; do echo "  $line"; done <<<"$named" >&2
  status=1
fi

if command -v shellcheck >/dev/null; then
  mapfile -t scripts < <(git ls-files -- '*.sh' .ci/run)
  shellcheck "${scripts[@]}" || status=1
else
  echo "zerojit tree check: shellcheck is not installed (scripts/setup.sh installs it)" >&2
  status=1
fi

if ((status == 0)); then
  echo "zerojit tree check: no file over $max_lines lines, every named path exists, languages only" \
    "in their table, shellcheck clean"
fi
exit "$status"
