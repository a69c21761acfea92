/* cuda.c — the CUDA device (placeholder until the runtime lands). */
#include "runtime/device.h"
#include "uop/uop.h"

const device *device_cuda(int idx) {
  tg_set_error(TG_ERR_DEVICE, "device CUDA:%d: the CUDA runtime is not built yet", idx);
  return NULL;
}
