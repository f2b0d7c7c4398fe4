# Finds Intel ISA-L (optional: its CRC-32 folds 64 bytes per step with VPCLMULQDQ where the CPU
# has it, about 3x libdeflate 1.14's) and defines Isal::Isal.
find_path(Isal_INCLUDE_DIR isa-l/crc.h)
find_library(Isal_LIBRARY NAMES isal)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Isal REQUIRED_VARS Isal_LIBRARY Isal_INCLUDE_DIR)
if(Isal_FOUND AND NOT TARGET Isal::Isal)
  add_library(Isal::Isal UNKNOWN IMPORTED)
  set_target_properties(Isal::Isal PROPERTIES IMPORTED_LOCATION "${Isal_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Isal_INCLUDE_DIR}")
endif()
