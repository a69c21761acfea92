/* opencl_api.c — the OpenCL functions the device uses, resolved from the ICD loader at run time: tgc links no
 * OpenCL library and runs where none is installed (device CL then reports what to install). */
#include <dlfcn.h>
#include <stdio.h>

#include "runtime/opencl_api.h"

cl_api opencl_fn;

const char *opencl_api_load(void **lib, char *why, size_t n) {
  *lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!*lib) *lib = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
  if (!*lib) {
    snprintf(why, n, "libOpenCL.so.1 not found");
    return why;
  }
  const char *missing = NULL;
#define CL_LOAD(name, ret, params)                  \
  opencl_fn.name = (ret(*) params)dlsym(*lib, #name); \
  if (!opencl_fn.name && !missing) missing = #name;
  CL_FUNCS(CL_LOAD)
#undef CL_LOAD
  if (!missing) return NULL;
  snprintf(why, n, "libOpenCL.so.1 has no function %s (an OpenCL 1.2 loader is needed)", missing);
  return why;
}

const char *opencl_error_name(cl_int e) {
  switch (e) {
    case 0: return "CL_SUCCESS";
    case -1: return "CL_DEVICE_NOT_FOUND";
    case -2: return "CL_DEVICE_NOT_AVAILABLE";
    case -3: return "CL_COMPILER_NOT_AVAILABLE";
    case -4: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case -5: return "CL_OUT_OF_RESOURCES";
    case -6: return "CL_OUT_OF_HOST_MEMORY";
    case -7: return "CL_PROFILING_INFO_NOT_AVAILABLE";
    case -8: return "CL_MEM_COPY_OVERLAP";
    case -11: return "CL_BUILD_PROGRAM_FAILURE";
    case -12: return "CL_MAP_FAILURE";
    case -14: return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
    case -30: return "CL_INVALID_VALUE";
    case -31: return "CL_INVALID_DEVICE_TYPE";
    case -32: return "CL_INVALID_PLATFORM";
    case -33: return "CL_INVALID_DEVICE";
    case -34: return "CL_INVALID_CONTEXT";
    case -35: return "CL_INVALID_QUEUE_PROPERTIES";
    case -36: return "CL_INVALID_COMMAND_QUEUE";
    case -37: return "CL_INVALID_HOST_PTR";
    case -38: return "CL_INVALID_MEM_OBJECT";
    case -42: return "CL_INVALID_BINARY";
    case -43: return "CL_INVALID_BUILD_OPTIONS";
    case -44: return "CL_INVALID_PROGRAM";
    case -45: return "CL_INVALID_PROGRAM_EXECUTABLE";
    case -46: return "CL_INVALID_KERNEL_NAME";
    case -47: return "CL_INVALID_KERNEL_DEFINITION";
    case -48: return "CL_INVALID_KERNEL";
    case -49: return "CL_INVALID_ARG_INDEX";
    case -50: return "CL_INVALID_ARG_VALUE";
    case -51: return "CL_INVALID_ARG_SIZE";
    case -52: return "CL_INVALID_KERNEL_ARGS";
    case -53: return "CL_INVALID_WORK_DIMENSION";
    case -54: return "CL_INVALID_WORK_GROUP_SIZE";
    case -55: return "CL_INVALID_WORK_ITEM_SIZE";
    case -56: return "CL_INVALID_GLOBAL_OFFSET";
    case -57: return "CL_INVALID_EVENT_WAIT_LIST";
    case -58: return "CL_INVALID_EVENT";
    case -59: return "CL_INVALID_OPERATION";
    case -61: return "CL_INVALID_BUFFER_SIZE";
    case -63: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "an unknown OpenCL error";
  }
}
