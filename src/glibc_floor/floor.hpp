// Force-included (-include) into every zerojit source when zerojit is built against a glibc
// newer than the floor it ships for, 2.28 (cmake/ZerojitGlibcFloor.cmake; docs/CONSUMING.md,
// "Which systems it runs on"). A build on a newer glibc would otherwise reference, from the
// headers alone, symbols that glibc 2.28 does not have, and the static libraries would not
// link there. Each piece below makes the reference a glibc 2.28 build makes instead.
// What the static C++ runtime references is dealt with at link time (compat.cpp).
#pragma once

#if defined(__cplusplus) && defined(__linux__) && defined(__x86_64__)
#include <features.h>
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 29)

// 1. libstdc++'s headers read __libc_single_threaded (glibc 2.32) to skip the atomic reference
//    counts of a process with one thread. In its place, a variable that always says "maybe
//    threaded": every count stays atomic, which is what any process on an older glibc does.
extern "C" {
[[maybe_unused]] static char zerojit_libc_single_threaded_ = 0;
}
#define __libc_single_threaded zerojit_libc_single_threaded_

// 2. The steady-clock waits of <condition_variable>, <mutex> and <shared_mutex> call
//    pthread_cond_clockwait and the other *_clock* functions (glibc 2.30) where libstdc++ was
//    configured with them; without them, libstdc++ waits against the system clock, converting
//    the deadline, as it does on older systems.
#include <bits/c++config.h>
#undef _GLIBCXX_USE_PTHREAD_COND_CLOCKWAIT
#undef _GLIBCXX_USE_PTHREAD_MUTEX_CLOCKLOCK
#undef _GLIBCXX_USE_PTHREAD_RWLOCK_CLOCKLOCK

// 3. The stat family: glibc 2.33 made stat, fstat, lstat and fstatat functions of their own;
//    calls go to the __xstat family a glibc 2.28 build calls (a function-like macro leaves
//    `struct stat` alone; global names, so that `::stat(...)` expands to a valid call too).
#include "old_stat.hpp"
inline int zerojit_floor_stat(const char* path, struct stat* buffer) {
  return zerojit_xstat_(kZerojitStatVersion, path, buffer);
}
inline int zerojit_floor_lstat(const char* path, struct stat* buffer) {
  return zerojit_lxstat_(kZerojitStatVersion, path, buffer);
}
inline int zerojit_floor_fstat(int fd, struct stat* buffer) {
  return zerojit_fxstat_(kZerojitStatVersion, fd, buffer);
}
inline int zerojit_floor_fstatat(int dirfd, const char* path, struct stat* buffer, int flags) {
  return zerojit_fxstatat_(kZerojitStatVersion, dirfd, path, buffer, flags);
}
#define stat(path, buffer) zerojit_floor_stat(path, buffer)
#define lstat(path, buffer) zerojit_floor_lstat(path, buffer)
#define fstat(fd, buffer) zerojit_floor_fstat(fd, buffer)
#define fstatat(dirfd, path, buffer, flags) zerojit_floor_fstatat(dirfd, path, buffer, flags)

#endif  // glibc >= 2.29
#endif  // C++ on x86_64 Linux
