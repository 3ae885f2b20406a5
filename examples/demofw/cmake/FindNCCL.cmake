# Find the NCCL libraries -- after PyTorch's cmake/Modules/FindNCCL.cmake.
#
# The following variables are optionally searched for defaults
#  NCCL_ROOT: Base directory where all NCCL components are found
#  NCCL_INCLUDE_DIR: Directory where NCCL header is found
#  NCCL_LIB_DIR: Directory where NCCL library is found
#  NCCL_VERSION: soname suffix preferred when set (".so.${NCCL_VERSION}"); the pip wheels
#                ship only libnccl.so.2, so NCCL_VERSION=2 (or a libnccl.so symlink) is needed
#
#  NCCL_HEADER_NAME / NCCL_LIBRARY_NAME: what to look for (default nccl.h / nccl; a ROCm build
#                sets rccl.h / rccl: RCCL is found as the system NCCL)
#  NCCL_EXTRA_INCLUDE_DIRS / NCCL_EXTRA_DEFINITIONS: for the version check program (the header
#                includes cuda_runtime.h, or hip/hip_runtime.h with __HIP_PLATFORM_AMD__)
#
# The following are set after configuration is done:
#  NCCL_FOUND, NCCL_INCLUDE_DIRS, NCCL_LIBRARIES, NCCL_HEADER_VERSION (e.g. 2.28.9)
#
# The header and library versions are compared by building and running a small program
# (try_run); a mismatch is a FATAL_ERROR naming both versions.

set(NCCL_INCLUDE_DIR $ENV{NCCL_INCLUDE_DIR} CACHE PATH "Folder contains NVIDIA NCCL headers")
set(NCCL_LIB_DIR $ENV{NCCL_LIB_DIR} CACHE PATH "Folder contains NVIDIA NCCL libraries")
set(NCCL_VERSION $ENV{NCCL_VERSION} CACHE STRING "Version of NCCL to build with")

if(DEFINED ENV{NCCL_ROOT_DIR})
  message(WARNING "NCCL_ROOT_DIR is deprecated. Please set NCCL_ROOT instead.")
endif()
list(APPEND NCCL_ROOT $ENV{NCCL_ROOT_DIR} ${CUDA_TOOLKIT_ROOT_DIR})
# Compatible layer for CMake <3.12. NCCL_ROOT will be accounted in for searching paths and libraries for CMake >=3.12.
list(APPEND CMAKE_PREFIX_PATH ${NCCL_ROOT})

if(NOT NCCL_HEADER_NAME)
  set(NCCL_HEADER_NAME nccl.h)
endif()
if(NOT NCCL_LIBRARY_NAME)
  set(NCCL_LIBRARY_NAME nccl)
endif()

find_path(NCCL_INCLUDE_DIRS
  NAMES ${NCCL_HEADER_NAME}
  HINTS ${NCCL_INCLUDE_DIR} $ENV{NCCL_ROOT}/include)

if(USE_STATIC_NCCL)
  message(STATUS "USE_STATIC_NCCL is set. Linking with static NCCL library.")
  set(NCCL_LIBNAME "${NCCL_LIBRARY_NAME}_static")
  if(NCCL_VERSION)  # Prefer the versioned library if a specific NCCL version is specified
    set(CMAKE_FIND_LIBRARY_SUFFIXES ".a.${NCCL_VERSION}" ${CMAKE_FIND_LIBRARY_SUFFIXES})
  endif()
else()
  set(NCCL_LIBNAME "${NCCL_LIBRARY_NAME}")
  if(NCCL_VERSION)  # Prefer the versioned library if a specific NCCL version is specified
    set(CMAKE_FIND_LIBRARY_SUFFIXES ".so.${NCCL_VERSION}" ${CMAKE_FIND_LIBRARY_SUFFIXES})
  endif()
endif()

find_library(NCCL_LIBRARIES
  NAMES ${NCCL_LIBNAME}
  HINTS ${NCCL_LIB_DIR} $ENV{NCCL_ROOT}/lib $ENV{NCCL_ROOT}/lib64)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL DEFAULT_MSG NCCL_INCLUDE_DIRS NCCL_LIBRARIES)

if(NCCL_FOUND)  # obtaining NCCL version and some sanity checks
  set(NCCL_HEADER_FILE "${NCCL_INCLUDE_DIRS}/${NCCL_HEADER_NAME}")
  message(STATUS "Determining NCCL version from ${NCCL_HEADER_FILE}...")
  file(STRINGS "${NCCL_HEADER_FILE}" _nccl_defs REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX REPLACE ".*#define NCCL_${_part} +([0-9]+).*" "\\1" NCCL_${_part} "${_nccl_defs}")
  endforeach()
  set(NCCL_HEADER_VERSION "${NCCL_MAJOR}.${NCCL_MINOR}.${NCCL_PATCH}")

  set(file "${PROJECT_BINARY_DIR}/detect_nccl_version.cc")
  file(WRITE ${file} "
#include <cstdio>
#include <${NCCL_HEADER_NAME}>
int main()
{
  int x = 0;
  ncclGetVersion(&x);
  // header version; library version code
  std::printf(\"%d.%d.%d;%d\", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, x);
  return x == NCCL_VERSION_CODE;
}
")
  get_filename_component(_nccl_lib_dir "${NCCL_LIBRARIES}" DIRECTORY)
  # never trust a cached result: the library may have been swapped since the last configure
  unset(NCCL_VERSION_MATCHED CACHE)
  unset(NCCL_VERSION_COMPILED CACHE)
  try_run(NCCL_VERSION_MATCHED NCCL_VERSION_COMPILED ${PROJECT_BINARY_DIR} ${file}
          RUN_OUTPUT_VARIABLE NCCL_VERSION_OUTPUT
          COMPILE_OUTPUT_VARIABLE NCCL_VERSION_COMPILE_OUTPUT
          CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${NCCL_INCLUDE_DIRS};${NCCL_EXTRA_INCLUDE_DIRS}"
          COMPILE_DEFINITIONS ${NCCL_EXTRA_DEFINITIONS}
          LINK_OPTIONS "-Wl,-rpath,${_nccl_lib_dir}"
          LINK_LIBRARIES ${NCCL_LIBRARIES})
  if(NOT NCCL_VERSION_COMPILED)
    message(FATAL_ERROR "Could not build the NCCL version check against ${NCCL_HEADER_FILE} and "
                        "${NCCL_LIBRARIES}:\n${NCCL_VERSION_COMPILE_OUTPUT}")
  endif()
  list(GET NCCL_VERSION_OUTPUT 0 NCCL_VERSION_FROM_HEADER)
  list(LENGTH NCCL_VERSION_OUTPUT _n)
  set(NCCL_LIBRARY_VERSION "unknown (the check program did not run: ${NCCL_VERSION_MATCHED})")
  if(_n GREATER 1)
    list(GET NCCL_VERSION_OUTPUT 1 _code)
    if(_code LESS 20900)
      math(EXPR _maj "${_code} / 1000")
      math(EXPR _min "(${_code} % 1000) / 100")
    else()
      math(EXPR _maj "${_code} / 10000")
      math(EXPR _min "(${_code} % 10000) / 100")
    endif()
    math(EXPR _pat "${_code} % 100")
    set(NCCL_LIBRARY_VERSION "${_maj}.${_min}.${_pat}")
  endif()
  if(NOT NCCL_VERSION_MATCHED STREQUAL "1")
    message(FATAL_ERROR "Found NCCL header version and library version do not match! \
(include: ${NCCL_INCLUDE_DIRS}, library: ${NCCL_LIBRARIES}) \
header version ${NCCL_HEADER_VERSION}, library version ${NCCL_LIBRARY_VERSION}. \
Please set NCCL_INCLUDE_DIR and NCCL_LIB_DIR manually.")
  endif()
  message(STATUS "NCCL version: ${NCCL_VERSION_FROM_HEADER} (header and library agree)")
  message(STATUS "Found NCCL (include: ${NCCL_INCLUDE_DIRS}, library: ${NCCL_LIBRARIES})")
  mark_as_advanced(NCCL_ROOT_DIR NCCL_INCLUDE_DIRS NCCL_LIBRARIES)
endif()
