# ROCm/HIP -- after PyTorch's cmake/public/LoadHIP.cmake (its contract, not its code).
#
#  ROCM_PATH (environment)   the ROCm root; default /opt/rocm (AMD's packages). Debian and Ubuntu
#                            ship ROCm under /usr (ROCM_PATH=/usr), with the CMake packages in
#                            /usr/lib/<multiarch>/cmake: found here too.
#  PYTORCH_ROCM_ARCH         the gfx targets, "gfx90a;gfx942" or "gfx90a gfx942". Unset, PyTorch asks
#                            rocm_agent_enumerator for the GPUs of this machine and stops when that
#                            fails (no GPU in a container build): so does demofw.
#  HIPCXX                    the HIP compiler (clang++), CMake's own variable; else
#                            $ROCM_PATH/llvm/bin/clang++ (AMD's layout), else clang++ on PATH.
#
# Sets DFW_FOUND_HIP, DFW_HIP_VERSION (from hip_version.h, e.g. 5.7.31921, as torch.version.hip),
# DFW_ROCM_ARCH (the list) and enables CMake's HIP language for the .hip sources. PyTorch compiles
# its .hip files through FindHIP's hip_add_library (hipcc); demofw uses CMake's HIP language (clang++
# with one --offload-arch per target, what hipcc runs underneath), so Ninja and ccache see each unit.

set(DFW_FOUND_HIP FALSE)
set(DFW_HIP_VERSION "")
set(DFW_ROCM_ARCH "")

if(DEFINED ENV{ROCM_PATH} AND NOT "$ENV{ROCM_PATH}" STREQUAL "")
  set(ROCM_PATH "$ENV{ROCM_PATH}")
else()
  set(ROCM_PATH /opt/rocm)
endif()

find_file(DFW_HIP_VERSION_H hip/hip_version.h PATHS "${ROCM_PATH}/include" NO_DEFAULT_PATH NO_CACHE)
if(NOT DFW_HIP_VERSION_H)
  message(STATUS "ROCm not found at ROCM_PATH=${ROCM_PATH} (no include/hip/hip_version.h): not compiling with ROCm")
  return()
endif()

# The gfx targets: PYTORCH_ROCM_ARCH, else this machine's GPUs (torch_hip_get_arch_list).
if(DEFINED ENV{PYTORCH_ROCM_ARCH})
  set(_arch "$ENV{PYTORCH_ROCM_ARCH}")
else()
  execute_process(COMMAND rocm_agent_enumerator RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  string(REGEX REPLACE "gfx000[ \n]*" "" _arch "${_out}")
  if(NOT _rc EQUAL 0 OR _arch STREQUAL "")
    message(FATAL_ERROR "Could not detect ROCm arch for GPUs on machine (rocm_agent_enumerator: rc=${_rc} ${_err}). "
                        "Set PYTORCH_ROCM_ARCH, e.g. PYTORCH_ROCM_ARCH=\"gfx90a;gfx942\"")
  endif()
endif()
string(STRIP "${_arch}" _arch)
string(REGEX REPLACE "[ \t\n]+" ";" _arch "${_arch}")
list(REMOVE_ITEM _arch "")
list(REMOVE_DUPLICATES _arch)
foreach(_a IN LISTS _arch)
  if(NOT _a MATCHES "^gfx[0-9a-f]+(:[a-z]+[+-])*$")
    message(FATAL_ERROR "PYTORCH_ROCM_ARCH: '${_a}' is not a gfx target (e.g. gfx90a, gfx942, gfx90a:xnack-)")
  endif()
endforeach()
if(NOT _arch)
  message(FATAL_ERROR "PYTORCH_ROCM_ARCH is empty; set it, e.g. PYTORCH_ROCM_ARCH=\"gfx90a;gfx942\"")
endif()
set(DFW_ROCM_ARCH "${_arch}")
message(STATUS "HIP targets (PYTORCH_ROCM_ARCH): ${DFW_ROCM_ARCH}")

# CMake's HIP language: the compiler, and where ROCm keeps hip-lang-config.cmake.
if(NOT CMAKE_HIP_COMPILER AND "$ENV{HIPCXX}" STREQUAL "" AND EXISTS "${ROCM_PATH}/llvm/bin/clang++")
  set(CMAKE_HIP_COMPILER "${ROCM_PATH}/llvm/bin/clang++")
endif()
if(NOT DEFINED CMAKE_HIP_COMPILER_ROCM_LIB AND NOT EXISTS "${ROCM_PATH}/lib/cmake/hip-lang"
   AND CMAKE_LIBRARY_ARCHITECTURE AND EXISTS "${ROCM_PATH}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/hip-lang")
  # Debian/Ubuntu multiarch layout (CMake looks only in lib/ and lib64/ by itself)
  set(CMAKE_HIP_COMPILER_ROCM_LIB "${ROCM_PATH}/lib/${CMAKE_LIBRARY_ARCHITECTURE}")
endif()
set(CMAKE_HIP_ARCHITECTURES ${DFW_ROCM_ARCH})
enable_language(HIP)
set(CMAKE_HIP_STANDARD 17)
set(CMAKE_HIP_STANDARD_REQUIRED ON)

list(APPEND CMAKE_PREFIX_PATH "${ROCM_PATH}")
find_package(hip CONFIG REQUIRED)  # hip::host: the HIP runtime for the C++ units that call it

file(STRINGS "${DFW_HIP_VERSION_H}" _defs REGEX "^#define HIP_VERSION_(MAJOR|MINOR|PATCH|GITHASH) ")
foreach(_part MAJOR MINOR PATCH GITHASH)
  set(_v "")
  foreach(_line IN LISTS _defs)
    if(_line MATCHES "^#define HIP_VERSION_${_part} +\"?([^\"]*)\"?$")
      set(_v "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(_hip_${_part} "${_v}")
endforeach()
set(DFW_HIP_VERSION "${_hip_MAJOR}.${_hip_MINOR}.${_hip_PATCH}")
if(_hip_GITHASH)
  string(APPEND DFW_HIP_VERSION "-${_hip_GITHASH}")
endif()
set(DFW_FOUND_HIP TRUE)
message(STATUS "Found HIP ${DFW_HIP_VERSION}: ${CMAKE_HIP_COMPILER} (${CMAKE_HIP_COMPILER_VERSION}), ROCM_PATH=${ROCM_PATH}")
