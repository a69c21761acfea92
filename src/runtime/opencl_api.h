/* opencl_api.h — the part of the OpenCL 1.2 API (Khronos CL/cl.h) the OpenCL device uses, declared here so that
 * tgc builds without OpenCL headers, and its functions resolved at run time from the ICD loader (opencl_api.c). */
#ifndef TG_OPENCL_API_H
#define TG_OPENCL_API_H

#include <stddef.h>
#include <stdint.h>

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_uint cl_bool;
typedef cl_ulong cl_bitfield;
typedef cl_bitfield cl_device_type;
typedef cl_bitfield cl_mem_flags;
typedef cl_bitfield cl_command_queue_properties;
typedef cl_uint cl_device_info;
typedef cl_uint cl_program_info;
typedef cl_uint cl_program_build_info;
typedef cl_uint cl_profiling_info;
typedef intptr_t cl_context_properties;
typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;

#define CL_SUCCESS 0
#define CL_TRUE 1
#define CL_DEVICE_TYPE_GPU ((cl_device_type)1 << 2)
#define CL_DEVICE_TYPE_ALL ((cl_device_type)0xFFFFFFFF)
#define CL_DEVICE_TYPE 0x1000
#define CL_DEVICE_NAME 0x102B
#define CL_DRIVER_VERSION 0x102D
#define CL_DEVICE_VERSION 0x102F
#define CL_QUEUE_PROFILING_ENABLE ((cl_command_queue_properties)1 << 1)
#define CL_MEM_READ_WRITE ((cl_mem_flags)1 << 0)
#define CL_PROGRAM_BINARY_SIZES 0x1165
#define CL_PROGRAM_BINARIES 0x1166
#define CL_PROGRAM_BUILD_LOG 0x1183
#define CL_PROFILING_COMMAND_START 0x1282
#define CL_PROFILING_COMMAND_END 0x1283

#define CL_DEVICE_NOT_FOUND (-1)
#define CL_MEM_OBJECT_ALLOCATION_FAILURE (-4)
#define CL_OUT_OF_RESOURCES (-5)
#define CL_OUT_OF_HOST_MEMORY (-6)
#define CL_MEM_COPY_OVERLAP (-8)
#define CL_BUILD_PROGRAM_FAILURE (-11)
#define CL_INVALID_KERNEL_NAME (-46)
#define CL_INVALID_BUFFER_SIZE (-61)

typedef void (*cl_notify_fn)(const char *, const void *, size_t, void *);
typedef void (*cl_build_fn)(cl_program, void *);

/* X(name, return type, parameters) for each function resolved with dlsym */
#define CL_FUNCS(X)                                                                                            \
  X(clGetPlatformIDs, cl_int, (cl_uint, cl_platform_id *, cl_uint *))                                          \
  X(clGetDeviceIDs, cl_int, (cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *))              \
  X(clGetDeviceInfo, cl_int, (cl_device_id, cl_device_info, size_t, void *, size_t *))                         \
  X(clCreateContext, cl_context,                                                                               \
    (const cl_context_properties *, cl_uint, const cl_device_id *, cl_notify_fn, void *, cl_int *))            \
  X(clReleaseContext, cl_int, (cl_context))                                                                    \
  X(clCreateCommandQueue, cl_command_queue, (cl_context, cl_device_id, cl_command_queue_properties, cl_int *)) \
  X(clReleaseCommandQueue, cl_int, (cl_command_queue))                                                         \
  X(clCreateBuffer, cl_mem, (cl_context, cl_mem_flags, size_t, void *, cl_int *))                              \
  X(clReleaseMemObject, cl_int, (cl_mem))                                                                      \
  X(clEnqueueWriteBuffer, cl_int,                                                                              \
    (cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint, const cl_event *, cl_event *))  \
  X(clEnqueueReadBuffer, cl_int,                                                                               \
    (cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint, const cl_event *, cl_event *))        \
  X(clEnqueueCopyBuffer, cl_int,                                                                               \
    (cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint, const cl_event *, cl_event *))         \
  X(clCreateProgramWithSource, cl_program, (cl_context, cl_uint, const char **, const size_t *, cl_int *))     \
  X(clCreateProgramWithBinary, cl_program,                                                                     \
    (cl_context, cl_uint, const cl_device_id *, const size_t *, const unsigned char **, cl_int *, cl_int *))   \
  X(clBuildProgram, cl_int, (cl_program, cl_uint, const cl_device_id *, const char *, cl_build_fn, void *))    \
  X(clGetProgramBuildInfo, cl_int, (cl_program, cl_device_id, cl_program_build_info, size_t, void *, size_t *)) \
  X(clGetProgramInfo, cl_int, (cl_program, cl_program_info, size_t, void *, size_t *))                         \
  X(clReleaseProgram, cl_int, (cl_program))                                                                    \
  X(clRetainProgram, cl_int, (cl_program))                                                                     \
  X(clCreateKernel, cl_kernel, (cl_program, const char *, cl_int *))                                           \
  X(clReleaseKernel, cl_int, (cl_kernel))                                                                      \
  X(clGetKernelInfo, cl_int, (cl_kernel, cl_uint, size_t, void *, size_t *))                                   \
  X(clSetKernelArg, cl_int, (cl_kernel, cl_uint, size_t, const void *))                                        \
  X(clEnqueueNDRangeKernel, cl_int,                                                                            \
    (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint,            \
     const cl_event *, cl_event *))                                                                            \
  X(clWaitForEvents, cl_int, (cl_uint, const cl_event *))                                                      \
  X(clGetEventProfilingInfo, cl_int, (cl_event, cl_profiling_info, size_t, void *, size_t *))                 \
  X(clReleaseEvent, cl_int, (cl_event))                                                                        \
  X(clFinish, cl_int, (cl_command_queue))

#define CL_DECLARE(name, ret, params) ret(*name) params;
typedef struct cl_api { CL_FUNCS(CL_DECLARE) } cl_api;
#undef CL_DECLARE

/* the functions, set by opencl_api_load */
extern cl_api opencl_fn;

/* dlopens libOpenCL.so.1 (else libOpenCL.so) and resolves every function of CL_FUNCS into cl. NULL when that
 * worked, else what failed (the library missing, or the name of a function it lacks), as a static string */
const char *opencl_api_load(void **lib, char *why, size_t n);

/* the name of an OpenCL error code, for messages */
const char *opencl_error_name(cl_int e);

#endif
