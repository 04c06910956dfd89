// Program start-up for zerojit's executables under its glibc floor (cmake/ZerojitGlibcFloor.cmake).
//
// The start-up code of glibc 2.34 and later (crt1.o) calls __libc_start_main@GLIBC_2.34 with no
// initializer, leaving the program's constructors to glibc; glibc 2.28 has only
// __libc_start_main@GLIBC_2.2.5, which runs the constructors it is handed, and its dynamic
// linker leaves the executable's own to it. So the call is redirected (--wrap) to the old
// version with the initializer a glibc 2.28 build links in (what its __libc_csu_init did: _init,
// then .init_array; .preinit_array is the dynamic linker's). glibc 2.34 and later still run an
// initializer they are handed, and then do not run the constructors themselves: each runs once.
extern "C" {

using InitFunction = void (*)(int, char**, char**);

extern InitFunction __init_array_start[] __attribute__((visibility("hidden")));
extern InitFunction __init_array_end[] __attribute__((visibility("hidden")));
void _init();

int zerojit_libc_start_main_(int (*main)(int, char**, char**), int argc, char** argv,
                             InitFunction init, void (*fini)(), void (*rtld_fini)(),
                             void* stack_end);

static void zerojit_run_constructors(int argc, char** argv, char** envp) {
  _init();
  const auto count = static_cast<unsigned long>(__init_array_end - __init_array_start);
  for (unsigned long i = 0; i < count; ++i) __init_array_start[i](argc, argv, envp);
}

__attribute__((visibility("hidden"))) int __wrap___libc_start_main(
    int (*main)(int, char**, char**), int argc, char** argv, InitFunction init, void (*fini)(),
    void (*rtld_fini)(), void* stack_end) {
  return zerojit_libc_start_main_(main, argc, argv,
                                  init != nullptr ? init : zerojit_run_constructors, fini,
                                  rtld_fini, stack_end);
}

}  // extern "C"

__asm__(".symver zerojit_libc_start_main_,__libc_start_main@GLIBC_2.2.5");
