# LibTorch from the pinned PyPI wheel (CMAKE_PREFIX_PATH = torch.utils.cmake_prefix_path).
# The wheel is the CUDA build, so its CMake config wants the CUDA toolkit; it is only needed
# to compile and link, and TORCH_CUDA_ARCH_LIST keeps it from probing for a GPU.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "9.0")
endif()
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
find_package(Torch REQUIRED)
# TORCH_CXX_FLAGS carries the ABI macro; keep it on everything that sees torch headers.
separate_arguments(FRUGAL_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")

# One interface target for torch, so consumers (the library, tests, examples) agree on flags.
# torch's CPU library only: torch's CUDA libraries are loaded at run time, where the machine has
# an NVIDIA driver, with libfrugal_cuda.so (src/cuda/cuda_runtime.h; ~0.17 s of every process's
# start-up without them).
if(NOT TARGET frugal_torch)
  add_library(frugal_torch INTERFACE)
  target_link_libraries(frugal_torch INTERFACE torch_cpu_library)
  # (torch's include folders, as the `torch` target of the consumer's find_package(Torch) has
  # them: no path of the building machine in the exported target)
  target_include_directories(frugal_torch INTERFACE
    $<TARGET_PROPERTY:torch,INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_options(frugal_torch INTERFACE ${FRUGAL_TORCH_CXX_FLAGS})
  # torch ships its own fmt (v12) in its include folder, ahead of Debian's fmt 9 that spdlog
  # is built against: frugal formats with torch's fmt, header-only (c10 does not export fmt),
  # and keeps spdlog in one translation unit that never sees torch's include folder.
  target_compile_definitions(frugal_torch INTERFACE FMT_HEADER_ONLY=1)
  # libtorch_cpu.so exports its own, older copies of std::filesystem (built with another GCC);
  # when they are found before libstdc++'s, std::filesystem calls jump into the wrong layout
  # and crash. Putting libstdc++ first among the needed libraries makes its symbols win.
  target_link_options(frugal_torch INTERFACE
    "LINKER:--push-state,--no-as-needed" -lstdc++ "LINKER:--pop-state")
endif()

# The precompiled header every torch-using target shares the recipe for, and one copy of it:
# the library's (frugal_unfuzzed's; frugal_fuzzed's in the fuzz build, which has no other).
# GCC uses a header only in compilations with its -fPIC (not the -fPIE CMake gives
# executables), so the executables that take it are compiled -fPIC (for a program, at most an
# indirection more to its own globals: its work is done in libfrugal and torch), and the
# quickstart compiles one header instead of two (the CLI's took ~40 s at the end of the build,
# one core idle, before the CLI's own compilation could start).
# frugal_torch_pch(TARGET [REUSE_FROM OTHER]): OTHER's precompiled header (compiled with the
# same flags) instead of one of TARGET's own.
function(frugal_torch_pch target)
  if(NOT FRUGAL_USE_PCH)
    return()
  endif()
  if(ARGC EQUAL 3 AND ARGV1 STREQUAL "REUSE_FROM")
    target_precompile_headers(${target} REUSE_FROM ${ARGV2})
    return()
  endif()
  # clang writes the header's time into it, and ccache then never reuses what was compiled
  # with it (the fuzz build's clang).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${target} PRIVATE -Xclang -fno-pch-timestamp)
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    if(TARGET frugal_unfuzzed)
      set(owner frugal_unfuzzed)
    else()
      set(owner frugal_fuzzed)
    endif()
    # (after CMake's -fPIE: the last of the two counts). A header GCC cannot use is an error,
    # not a warning and each file parsing torch's headers again (~25 s a file).
    target_compile_options(${target} PRIVATE -fPIC
      $<$<CXX_COMPILER_ID:GNU>:-Werror=invalid-pch>)
    target_precompile_headers(${target} REUSE_FROM ${owner})
  else()
    target_precompile_headers(${target} PRIVATE
      <torch/torch.h>
      <fmt/format.h>
      <nlohmann/json.hpp>)
  endif()
endfunction()
