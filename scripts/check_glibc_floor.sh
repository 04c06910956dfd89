#!/usr/bin/env bash
# Checks zerojit's glibc floor (cmake/ZerojitGlibcFloor.cmake) on what a build made:
#   * an executable or shared object may need no GLIBC_ symbol version above the floor
#     (objdump -T: what the dynamic linker will ask the system's glibc for);
#   * a static library may reference no glibc symbol that the floor lacks altogether (nm -u:
#     what a link against that glibc must find). Which symbols those are is read from this
#     machine's glibc: the ones all of whose versions are newer than the floor.
#   scripts/check_glibc_floor.sh FLOOR FILE...        (e.g. 2.28 build/tools/zerojit ...)
# Exit 0: every file keeps the floor; 1: some file does not (each symbol is named); 77: the
# check cannot run here (no objdump or nm, or no glibc to read).
set -euo pipefail
floor=${1:?usage: check_glibc_floor.sh FLOOR FILE...}
shift
for tool in objdump nm; do
  command -v "$tool" >/dev/null || { echo "skipped: no $tool (binutils)"; exit 77; }
done

# "2.34" -> 2034, so that versions compare as numbers.
version_number() { awk -F. '{ printf "%d\n", $1 * 1000 + $2 }' <<<"$1"; }
floor_number=$(version_number "$floor")

# The glibc libraries of this machine: where libc.so.6 is, its siblings.
libc=$(ldconfig -p 2>/dev/null | awk '/libc\.so\.6 .*x86-64/ { print $NF; exit }')
[ -n "$libc" ] || libc=$(gcc -print-file-name=libc.so.6 2>/dev/null || true)
if [ -z "$libc" ] || [ ! -e "$libc" ]; then
  echo "skipped: cannot find this machine's libc.so.6"
  exit 77
fi
libdir=$(dirname "$(readlink -f "$libc")")
# Symbols newer than the floor in every version: a reference to one cannot link on the floor.
newer_only=$(for lib in libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1; do
  [ -e "$libdir/$lib" ] && objdump -T "$libdir/$lib"
done | awk -v floor="$floor_number" '
  match($0, /GLIBC_[0-9]+\.[0-9]+/) {
    split(substr($0, RSTART + 6, RLENGTH - 6), v, ".")
    number = v[1] * 1000 + v[2]
    name = $NF
    if (!(name in oldest) || number < oldest[name]) oldest[name] = number
  }
  END { for (name in oldest) if (oldest[name] > floor) print name }' | sort)

failed=0
for file in "$@"; do
  if [ ! -e "$file" ]; then
    echo "FAIL $file: no such file" >&2
    failed=1
    continue
  fi
  case "$file" in
    *.a)
      # Undefined references of the archive's objects that the floor's glibc lacks.
      bad=$(nm -u "$file" 2>/dev/null | awk '{ print $NF }' | sed 's/@.*//' | sort -u |
            comm -12 - <(echo "$newer_only") || true)
      what="references symbols glibc $floor does not have"
      ;;
    *)
      bad=$(objdump -T "$file" | awk -v floor="$floor_number" '
        match($0, /GLIBC_[0-9]+\.[0-9]+(\.[0-9]+)?/) {
          split(substr($0, RSTART + 6, RLENGTH - 6), v, ".")
          if (v[1] * 1000 + v[2] > floor) print $NF " (" substr($0, RSTART, RLENGTH) ")"
        }' | sort -u)
      what="needs glibc versions above $floor"
      # The C++ runtime: linked statically into everything zerojit ships (the tool, the module,
      # the test binaries), so none may ask the system's libstdc++ for anything. The one
      # exception is a shared core (ZEROJIT_SHARED), whose C++ API shares the consumer's
      # runtime: it needs its compiler's libstdc++, which is said here and in
      # docs/CONSUMING.md.
      cxx=$(objdump -T "$file" | grep -oE '(GLIBCXX|CXXABI)_[0-9.]+' | sort -uV || true)
      if [ -n "$cxx" ]; then
        case "$(basename "$file")" in
          libzerojit.so*)
            echo "note $file needs the C++ runtime of its compiler: $(tail -n 1 <<<"$cxx" |
              sed 's/^/up to /') (docs/CONSUMING.md, ZEROJIT_SHARED)"
            ;;
          *)
            runtime=$(tr '\n' ' ' <<<"$cxx")
            bad+=$'\n'"the system's C++ runtime: ${runtime}(link it statically: zerojit_portable_link)"
            what="needs glibc versions above $floor or the system's libstdc++"
            ;;
        esac
      fi
      bad=$(sed '/^$/d' <<<"$bad")
      ;;
  esac
  if [ -n "$bad" ]; then
    echo "FAIL $file $what:" >&2
    while IFS= read -r line; do echo "  $line"; done <<<"$bad" >&2
    failed=1
  else
    echo "ok   $file"
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "what to do: cmake/ZerojitGlibcFloor.cmake says where each kind of symbol is dealt with" >&2
fi
exit "$failed"
