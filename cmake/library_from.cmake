# DRIFTSCOPE_LIBRARY_FROM (CMakeLists.txt): driftscope_lib is the library that another build tree of
# this source already compiled, imported from the driftscopeLibrary.cmake its configure exported.
# The tree must be built by the same compiler: the archive's objects are linked as they are.
set(ds_from "${DRIFTSCOPE_LIBRARY_FROM}")
if(DRIFTSCOPE_INSTALL)
  message(FATAL_ERROR "DRIFTSCOPE_LIBRARY_FROM: the install rules install a library compiled here; "
                      "configure with -DDRIFTSCOPE_INSTALL=OFF (as pip install . does)")
endif()
if(NOT EXISTS "${ds_from}/driftscopeLibrary.cmake" OR NOT EXISTS "${ds_from}/CMakeCache.txt")
  message(FATAL_ERROR "DRIFTSCOPE_LIBRARY_FROM=${ds_from}: not a configured driftscope build tree "
                      "(no driftscopeLibrary.cmake there; configure it, e.g. cmake --preset dev)")
endif()
load_cache("${ds_from}" READ_WITH_PREFIX ds_from_ driftscope_SOURCE_DIR CMAKE_CXX_COMPILER)
file(REAL_PATH "${ds_from_driftscope_SOURCE_DIR}" ds_from_source)
file(REAL_PATH "${PROJECT_SOURCE_DIR}" ds_this_source)
if(NOT ds_from_source STREQUAL ds_this_source)
  message(FATAL_ERROR "DRIFTSCOPE_LIBRARY_FROM=${ds_from}: that tree builds ${ds_from_source}, "
                      "not this source (${ds_this_source})")
endif()
file(REAL_PATH "${ds_from_CMAKE_CXX_COMPILER}" ds_from_cxx)
file(REAL_PATH "${CMAKE_CXX_COMPILER}" ds_this_cxx)
if(NOT ds_from_cxx STREQUAL ds_this_cxx)
  message(FATAL_ERROR "DRIFTSCOPE_LIBRARY_FROM=${ds_from}: compiled by ${ds_from_cxx}, "
                      "this build uses ${ds_this_cxx}; the objects must come from the same compiler")
endif()

include("${ds_from}/driftscopeLibrary.cmake")
set_target_properties(driftscope::driftscope PROPERTIES IMPORTED_GLOBAL TRUE)
# The tree's configuration (RelWithDebInfo for build/dev) serves whatever this build's type is.
get_target_property(ds_from_configs driftscope::driftscope IMPORTED_CONFIGURATIONS)
list(GET ds_from_configs 0 ds_from_config)
get_target_property(ds_from_archive driftscope::driftscope IMPORTED_LOCATION_${ds_from_config})
if(CMAKE_BUILD_TYPE)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" ds_this_config)
  set_target_properties(driftscope::driftscope PROPERTIES
    MAP_IMPORTED_CONFIG_${ds_this_config} ${ds_from_config})
endif()
if(NOT EXISTS "${ds_from_archive}")
  message(FATAL_ERROR "DRIFTSCOPE_LIBRARY_FROM=${ds_from}: ${ds_from_archive} is not built yet "
                      "(cmake --build ${ds_from} --target driftscope_lib)")
endif()
message(STATUS "driftscope: linking the library of ${ds_from} (${ds_from_archive})")
add_library(driftscope_lib ALIAS driftscope::driftscope)
