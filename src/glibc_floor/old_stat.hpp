// The stat family as glibc before 2.33 had it: __xstat and friends (_STAT_VER 1 on x86_64),
// which later glibc still provides under their old versions. glibc 2.33 made stat, fstat, lstat
// and fstatat functions of their own, which glibc 2.28 lacks. Used by floor.hpp (zerojit's own
// calls) and compat.cpp (the static C++ runtime's).
#pragma once

#include <sys/stat.h>

extern "C" {
int zerojit_xstat_(int version, const char* path, struct stat* buffer);
int zerojit_lxstat_(int version, const char* path, struct stat* buffer);
int zerojit_fxstat_(int version, int fd, struct stat* buffer);
int zerojit_fxstatat_(int version, int dirfd, const char* path, struct stat* buffer, int flags);
}
__asm__(".symver zerojit_xstat_,__xstat@GLIBC_2.2.5");
__asm__(".symver zerojit_lxstat_,__lxstat@GLIBC_2.2.5");
__asm__(".symver zerojit_fxstat_,__fxstat@GLIBC_2.2.5");
__asm__(".symver zerojit_fxstatat_,__fxstatat@GLIBC_2.4");

inline constexpr int kZerojitStatVersion = 1;  // _STAT_VER_LINUX
