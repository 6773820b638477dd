# nmkit_install(target): installs `target` and every nmkit library it links (directly or not) as the
# export set nmkitTargets (namespace nmkit::), the public headers, nmkitConfig.cmake with its version
# file, and nmkit.pc. Libraries are found from the link closure at configure time, so a module added
# by any folder (add_library + linking it into `nmkit`) is installed without editing this file; an
# include directory given as a plain ${PROJECT_SOURCE_DIR}/include is rewritten to build/install
# generator expressions so the export stays relocatable.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

function(nmkit_link_closure target out)
  set(seen ${${out}})
  get_target_property(kind ${target} TYPE)
  set(properties INTERFACE_LINK_LIBRARIES)
  if(NOT kind STREQUAL "INTERFACE_LIBRARY")
    list(APPEND properties LINK_LIBRARIES)
  endif()
  foreach(property ${properties})
    get_target_property(links ${target} ${property})
    if(NOT links)
      continue()
    endif()
    foreach(link ${links})
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" link "${link}")
      if(TARGET ${link} AND link MATCHES "^nmkit_" AND NOT link IN_LIST seen)
        list(APPEND seen ${link})
        nmkit_link_closure(${link} seen)
      endif()
    endforeach()
  endforeach()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

function(nmkit_install target)
  set(libraries "")
  nmkit_link_closure(${target} libraries)
  list(SORT libraries)
  set(static_libraries "")
  foreach(library ${libraries})
    get_target_property(includes ${library} INTERFACE_INCLUDE_DIRECTORIES)
    if(includes)
      list(TRANSFORM includes REPLACE "^${PROJECT_SOURCE_DIR}/include$"
           "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>;$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
      set_target_properties(${library} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${includes}")
    endif()
    get_target_property(kind ${library} TYPE)
    if(kind STREQUAL "STATIC_LIBRARY")
      string(APPEND static_libraries " -l${library}")
    endif()
  endforeach()
  set_target_properties(${target} PROPERTIES EXPORT_NAME nmkit)
  install(TARGETS ${target} ${libraries} EXPORT nmkitTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/nmkit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/nmkit)
  install(EXPORT nmkitTargets NAMESPACE nmkit:: DESTINATION ${config_dir})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/nmkitConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/nmkitConfig.cmake INSTALL_DESTINATION ${config_dir})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/nmkitConfigVersion.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/nmkitConfig.cmake ${PROJECT_BINARY_DIR}/nmkitConfigVersion.cmake
          DESTINATION ${config_dir})
  # Static libraries that may refer to each other: one link group, so their order does not matter.
  # After them, the system libraries the modules use (oneDNN, LAPACKE over OpenBLAS).
  set(NMKIT_PC_LIBS "-Wl,--start-group${static_libraries} -Wl,--end-group -ldnnl -llapacke -lopenblas -pthread")
  if(NMKIT_OPENMP_POOL)
    string(APPEND NMKIT_PC_LIBS " -fopenmp")
  endif()
  file(RELATIVE_PATH NMKIT_PC_UP /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/nmkit.pc.in ${PROJECT_BINARY_DIR}/nmkit.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/nmkit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  if(TARGET nmkit_cli)
    install(TARGETS nmkit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endfunction()
