/* device.c — devices by tinygrad's names, and the default one (DEV).
 *
 * "CPU" is always there. "CL[:n]" and "CUDA[:n]" open their drivers on first use (opencl.c, cuda.c); a name
 * that is not a device, or a device whose driver is missing, is an error that says so: a program that asked for
 * a GPU never runs on the CPU without being told.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda.h"
#include "runtime/device.h"
#include "uop/env.h"
#include "uop/uop.h"

/* "CL:2" -> kind DEVICE_CL, index 2; false for anything else (env.c has checked DEV's spelling already, but
 * device_get takes any string) */
static bool parse_name(const char *name, device_kind *kind, int *idx) {
  size_t n = strcspn(name, ":");
  char up[8];
  if (n == 0 || n >= sizeof up) return false;
  for (size_t i = 0; i < n; i++) up[i] = (char)toupper((unsigned char)name[i]);
  up[n] = 0;
  if (!strcmp(up, "CPU")) *kind = DEVICE_CPU;
  else if (!strcmp(up, "CL")) *kind = DEVICE_CL;
  else if (!strcmp(up, "CUDA")) *kind = DEVICE_CUDA;
  else return false;
  *idx = 0;
  if (!name[n]) return true;
  const char *d = name + n + 1;
  if (!*d || strlen(d) > 4) return false;
  for (const char *q = d; *q; q++)
    if (!isdigit((unsigned char)*q)) return false;
  *idx = atoi(d);
  return true;
}

const device *device_get(const char *name) {
  device_kind kind;
  int idx;
  if (!name || !parse_name(name, &kind, &idx)) {
    tg_set_error(TG_ERR_ARG, "device '%.64s': unknown; accepted: CPU, CPU:n, CL, CL:n, CUDA, CUDA:n", name ? name : "(null)");
    return NULL;
  }
  switch (kind) {
    case DEVICE_CPU:
      if (idx < DEVICE_CPU_MAX) return device_cpu_n(idx);
      tg_set_error(TG_ERR_ARG, "device '%.64s': the CPU devices are CPU:0 .. CPU:%d", name, DEVICE_CPU_MAX - 1);
      return NULL;
    case DEVICE_CL: return device_cl(idx);
    case DEVICE_CUDA: return device_cuda(idx);
  }
  return NULL;
}

/* DEV=CPU (or unset): the CPU; DEV=CL, CUDA:1, ...: that device, or NULL with the reason (a bad DEV is
 * TG_ERR_ARG from env.c; a missing driver TG_ERR_DEVICE from the device) */
const device *device_default(void) {
  if (env_check(ENV_BIT(ENV_DEV)) != TG_OK) return NULL;
  const char *dev = env_get()->dev;
  return dev[0] ? device_get(dev) : device_cpu();
}

void runtime_shutdown(void) {
  cpu_program_cache_clear();
  buffer_cache_flush();
  opencl_release_caches();
  cuda_release_caches();
  pool_shutdown();
}
