# `cmake --install build --prefix P` installs two components; `--component library` or
# `--component tools` installs one alone.
# - library: shardtrain::api (fully_shard and what it is built on: ::core, ::collectives,
#   ::parallel (the mesh and the FSDP runtime), ::checkpoint, ::optim; and ::models, the GPT-2
#   and Llama families) as static libraries, its headers under P/include/shardtrain (included
#   as "core/tensor.hpp", as inside the project), a
#   CMake package (find_package(shardtrain)) and a pkg-config file (shardtrain.pc). The
#   program's commands (launch/) and the simulator (simulate/) are not a library: no library
#   or header of theirs is installed.
# - tools: the programs in P/bin: shardtrain, shardtrain-simgrid and the launcher shardrun.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SHARDTRAIN_EXPORTED core models collectives parallel checkpoint optim api)
foreach(target ${SHARDTRAIN_EXPORTED})
  get_target_property(export_name ${target} EXPORT_NAME)
  if(NOT export_name)
    set(export_name ${target})
  endif()
  # libshardtrain_core.a, not a bare libcore.a in a shared lib/.
  set_target_properties(${target} PROPERTIES OUTPUT_NAME shardtrain_${export_name})
  target_include_directories(${target}
    INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/shardtrain>)
endforeach()

install(TARGETS ${SHARDTRAIN_EXPORTED} EXPORT shardtrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT library)
# The program, and the simulator's network engine that `simulate` runs (never linked into a
# library user).
install(TARGETS shardtrain shardtrain-simgrid RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        COMPONENT tools)
# The launcher, beside the program: bench and `simulate calibrate` start ranks with it.
install(PROGRAMS launch/shardrun DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
install(EXPORT shardtrainTargets NAMESPACE shardtrain::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardtrain COMPONENT library)
install(DIRECTORY core models collectives parallel checkpoint optim api
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardtrain COMPONENT library
        FILES_MATCHING PATTERN "*.hpp")

configure_package_config_file(cmake/shardtrainConfig.cmake.in
  ${CMAKE_BINARY_DIR}/shardtrainConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardtrain)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/shardtrainConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/shardtrainConfig.cmake
              ${CMAKE_BINARY_DIR}/shardtrainConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardtrain COMPONENT library)

# pkg-config: the same libraries, in link order, with what they need.
get_filename_component(SHARDTRAIN_XXHASH_DIR ${XXHASH_LIBRARY} DIRECTORY)
# The prefix relative to the .pc file, so `--prefix P` at install time is honoured.
file(RELATIVE_PATH SHARDTRAIN_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(cmake/shardtrain.pc.in ${CMAKE_BINARY_DIR}/shardtrain.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/shardtrain.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT library)
