# aarch64-linux-gnu.cmake — cross toolchain for 64-bit ARM Linux with Debian's
# gcc-aarch64-linux-gnu (+ libc6-dev-arm64-cross); scripts/arm_test.sh uses it:
#   cmake -S . -B build/arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DLIK_CUDA=OFF -DLIK_AARCH64_DEPS=build/arm64-deps
# LIK_AARCH64_DEPS (optional) is a folder holding the `lik` command's arm64
# libraries: Debian's libcjson-dev / libcjson1 / libsqlite3-dev / libsqlite3-0
# for arm64, unpacked with `dpkg -x` (scripts/arm_test.sh downloads them with
# `apt-get download ...:arm64`; nothing is installed for arm64).  CMake and
# pkg-config look for headers, libraries and .pc files there as well; the
# programs get its lib folder as their build RPATH.  Without it configure with
# -DLIK_BUILD_PROGRAMS=OFF (library and C tests only).
# The tests run under qemu-aarch64 (Debian's qemu-user) when CMake finds it:
# ctest then runs every test program through CMAKE_CROSSCOMPILING_EMULATOR.
# LIK_AARCH64_PREFIX names another compiler prefix (default aarch64-linux-gnu-).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT DEFINED LIK_AARCH64_PREFIX)
  set(LIK_AARCH64_PREFIX aarch64-linux-gnu-)
endif()
set(CMAKE_C_COMPILER ${LIK_AARCH64_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${LIK_AARCH64_PREFIX}g++)

# Debian's cross libc lives in /usr/aarch64-linux-gnu; headers and libraries
# are looked up there only, programs (ninja, pkg-config) on the host.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
# try_compile projects read this file again: pass the deps folder on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES LIK_AARCH64_DEPS)
if(LIK_AARCH64_DEPS)
  get_filename_component(LIK_AARCH64_DEPS "${LIK_AARCH64_DEPS}" ABSOLUTE)
  list(APPEND CMAKE_FIND_ROOT_PATH ${LIK_AARCH64_DEPS})
  # pkg-config reads only the arm64 .pc files and puts the folder before their
  # /usr/include and /usr/lib/aarch64-linux-gnu (never the host's x86 ones).
  set(ENV{PKG_CONFIG_LIBDIR} ${LIK_AARCH64_DEPS}/usr/lib/aarch64-linux-gnu/pkgconfig)
  set(ENV{PKG_CONFIG_SYSROOT_DIR} ${LIK_AARCH64_DEPS})
  unset(ENV{PKG_CONFIG_PATH})
  # Debian's cJSONConfig.cmake names /usr/lib/aarch64-linux-gnu/libcjson.so.*
  # by absolute path (not the unpacked copy): use its pkg-config file instead.
  set(CMAKE_DISABLE_FIND_PACKAGE_cJSON TRUE)
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# qemu-user finds the cross loader and libc through -L (QEMU_LD_PREFIX).
if(NOT DEFINED CMAKE_CROSSCOMPILING_EMULATOR)
  find_program(LIK_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
  if(LIK_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${LIK_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
  endif()
endif()
