/* opencl.c — the OpenCL device (placeholder until the runtime lands). */
#include "runtime/device.h"
#include "uop/uop.h"

const tg_device *device_cl(int idx) {
  tg_set_error(TG_ERR_DEVICE, "device CL:%d: the OpenCL runtime is not built yet", idx);
  return NULL;
}
