// Link-time half of zerojit's glibc floor (cmake/ZerojitGlibcFloor.cmake): what the static C++
// runtime (libstdc++.a, built against the build machine's glibc) references that glibc 2.28
// lacks. Each such reference is redirected with the linker's --wrap=NAME to __wrap_NAME, defined
// here with what a glibc 2.28 system offers. (zerojit's own sources avoid these symbols at
// compile time: floor.hpp. Symbols that only gained a newer version are pinned to the old one
// by the trampolines generated from ZEROJIT_GLIBC_PINS.)
//
// Linked into the executables and shared objects zerojit ships (the tool, the Python module,
// libzerojit.so, the test programs), never into the static libraries.
#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "old_stat.hpp"

extern "C" {

// libstdc++ reads it to skip atomic reference counts in a single-threaded process (glibc 2.32).
// Always "maybe threaded": the counts stay atomic, as on any older glibc.
__attribute__((visibility("hidden"))) char __wrap___libc_single_threaded = 0;

// std::random_device (glibc 2.36's arc4random): the kernel's generator, as getrandom (glibc
// 2.25) gives it, or /dev/urandom on a kernel older than 3.17.
__attribute__((visibility("hidden"))) std::uint32_t __wrap_arc4random() {
  std::uint32_t value = 0;
  for (;;) {
    const ssize_t got = getrandom(&value, sizeof value, 0);
    if (got == static_cast<ssize_t>(sizeof value)) return value;
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno != ENOSYS) std::abort();  // arc4random cannot fail
    break;
  }
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || read(fd, &value, sizeof value) != static_cast<ssize_t>(sizeof value)) {
    std::abort();
  }
  close(fd);
  return value;
}

// The stat family of glibc 2.33 and later (stat64 is stat on x86_64), on the __xstat family.
__attribute__((visibility("hidden"))) int __wrap_stat(const char* path, struct stat* buffer) {
  return zerojit_xstat_(kZerojitStatVersion, path, buffer);
}
__attribute__((visibility("hidden"))) int __wrap_stat64(const char* path, struct stat* buffer) {
  return zerojit_xstat_(kZerojitStatVersion, path, buffer);
}
__attribute__((visibility("hidden"))) int __wrap_lstat(const char* path, struct stat* buffer) {
  return zerojit_lxstat_(kZerojitStatVersion, path, buffer);
}
__attribute__((visibility("hidden"))) int __wrap_lstat64(const char* path, struct stat* buffer) {
  return zerojit_lxstat_(kZerojitStatVersion, path, buffer);
}
__attribute__((visibility("hidden"))) int __wrap_fstat(int fd, struct stat* buffer) {
  return zerojit_fxstat_(kZerojitStatVersion, fd, buffer);
}
__attribute__((visibility("hidden"))) int __wrap_fstat64(int fd, struct stat* buffer) {
  return zerojit_fxstat_(kZerojitStatVersion, fd, buffer);
}
__attribute__((visibility("hidden"))) int __wrap_fstatat(int dirfd, const char* path,
                                                         struct stat* buffer, int flags) {
  return zerojit_fxstatat_(kZerojitStatVersion, dirfd, path, buffer, flags);
}
__attribute__((visibility("hidden"))) int __wrap_fstatat64(int dirfd, const char* path,
                                                           struct stat* buffer, int flags) {
  return zerojit_fxstatat_(kZerojitStatVersion, dirfd, path, buffer, flags);
}

}  // extern "C"
