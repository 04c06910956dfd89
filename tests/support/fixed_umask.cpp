// Every test process (and what it starts) creates files with umask 022, whatever the shell
// that ran ctest had. The disk cache refuses a root or a subdirectory that others may write
// (docs/CACHE.md, "Safety"), so the directories a test makes must not depend on a permissive
// umask (0002 in some CI containers, 0000 in others).
#include <sys/stat.h>

namespace {

const bool kUmaskFixed = [] {
  ::umask(022);
  return true;
}();

}  // namespace
