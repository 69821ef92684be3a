# Instrumented builds, each in a build folder of its own (tools/sanitize.sh, tools/fuzz.sh):
#   FRUGAL_SANITIZE=address,undefined   ASan + UBSan on everything frugal compiles (build-asan)
#   FRUGAL_SANITIZE=thread              TSan (build-tsan)
#   FRUGAL_FUZZ=ON                      clang's libFuzzer targets (fuzz/), with ASan + UBSan, and
#                                       the library compiled with coverage for them (build-fuzz)
# LibTorch and the Debian libraries stay uninstrumented: what they do is not checked, and their
# known reports are suppressed (tools/sanitizers/). Off by default: the normal build is untouched.
set(FRUGAL_SANITIZE "" CACHE STRING
    "Compile with these sanitizers (address,undefined or thread); empty: none")
option(FRUGAL_FUZZ "Build the libFuzzer targets (clang only) with ASan + UBSan" OFF)
set(FRUGAL_FUZZ_UNFUZZED_ARCHIVE "" CACHE FILEPATH
    "With FRUGAL_FUZZ: the normal build's libfrugal_unfuzzed.a (the library's code no fuzz target reaches)")

if(FRUGAL_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FRUGAL_FUZZ needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++-14")
  endif()
  if(FRUGAL_SANITIZE AND NOT FRUGAL_SANITIZE STREQUAL "address,undefined")
    message(FATAL_ERROR "FRUGAL_FUZZ brings its own sanitizers (address,undefined)")
  endif()
  set(FRUGAL_SANITIZE "address,undefined")
  # Coverage for the fuzzers' guidance in every frugal object the fuzz targets read files with
  # (the fuzz build compiles only those: src/CMakeLists.txt, frugal_unfuzzed); the fuzz targets
  # add the libFuzzer driver itself when they link (-fsanitize=fuzzer, fuzz/CMakeLists.txt).
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(FRUGAL_SANITIZE)
  if(NOT FRUGAL_SANITIZE MATCHES "^(address,undefined|address|undefined|thread)$")
    message(FATAL_ERROR "FRUGAL_SANITIZE: address,undefined, address, undefined or thread, "
                        "not '${FRUGAL_SANITIZE}'")
  endif()
  # -fno-sanitize-recover: an undefined behaviour stops the program (and fails its test)
  # instead of printing a line that nobody reads. Frame pointers and line tables make the
  # reports' stacks readable.
  set(_frugal_sanitize_flags -fsanitize=${FRUGAL_SANITIZE} -fno-sanitize-recover=all
      -fno-omit-frame-pointer -g1)
  if(FRUGAL_SANITIZE MATCHES "undefined")
    # vptr checks the dynamic type behind every polymorphic pointer by its type info, torch's
    # objects included, which were compiled elsewhere (some type info hidden in their
    # libraries): left out so that a report is always about frugal's own code.
    list(APPEND _frugal_sanitize_flags -fno-sanitize=vptr)
  endif()
  add_compile_options(${_frugal_sanitize_flags})
  add_link_options(-fsanitize=${FRUGAL_SANITIZE})
  message(STATUS "frugal: sanitizers ${FRUGAL_SANITIZE}")
endif()
