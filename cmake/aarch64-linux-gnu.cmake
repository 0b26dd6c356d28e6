# aarch64-linux-gnu.cmake — cross toolchain for 64-bit ARM Linux with Debian's
# gcc-aarch64-linux-gnu (+ libc6-dev-arm64-cross); scripts/arm_test.sh uses it:
#   cmake -S . -B build/arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DLIK_CUDA=OFF -DLIK_BUILD_PROGRAMS=OFF
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
