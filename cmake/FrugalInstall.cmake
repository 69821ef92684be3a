# `cmake --install build --prefix P` gives P/include/frugal, P/lib/libfrugal.so, P/bin/frugal and
# P/lib/cmake/frugal/frugalConfig.cmake, so that out-of-tree code does find_package(frugal).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS frugal frugal_torch EXPORT frugalTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS frugal_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# TensorBoard's event encoding, which libfrugal loads from its own folder (dlopen).
install(TARGETS frugal_tensorboard_events LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# ... and the CUDA runtime, loaded where the machine has an NVIDIA driver (docs/gpu.md).
if(TARGET frugal_cuda)
  install(TARGETS frugal_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY include/frugal DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT frugalTargets NAMESPACE frugal:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/frugal)

configure_package_config_file(cmake/frugalConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/frugalConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/frugal)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/frugalConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_CURRENT_BINARY_DIR}/frugalConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/frugalConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/frugal)
