# ccache makes a second clone's clean build mostly cache hits. The sloppiness settings are what
# lets ccache cache translation units that use a precompiled header; base_dir makes hits
# independent of where the clone lives.
find_program(FRUGAL_CCACHE ccache)
if(FRUGAL_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}
      CCACHE_NOHASHDIR=1
      ${FRUGAL_CCACHE})
  message(STATUS "frugal: compiling through ccache (${FRUGAL_CCACHE})")
endif()
