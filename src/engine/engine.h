/* engine.h — what the layers above the frontend (nn/) may ask of the engine beyond tg.h. */
#ifndef TG_ENGINE_H
#define TG_ENGINE_H

#include "tg.h"

/* overwrites the storage of a realized, contiguous tensor with nbytes from src (an optimizer's learning
 * rate: the kernels that read it stay the same) */
tg_status tensor_write(tg_tensor *t, const void *src, size_t nbytes);

/* x replicated over the devices of like when like is sharded (tg_shard), as a new tensor in the current scope;
 * else x itself (no new reference). An optimizer's scalars (learning rate, step counts) meet its parameters so */
tg_tensor *tensor_replicate_like(tg_tensor *x, const tg_tensor *like);

/* the buffer holding a realized tensor's value (NULL if it has none) */
struct tg_buffer;
struct tg_buffer *tensor_storage(tg_tensor *t);

/* fn(ast) is called for every kernel the engine compiles (not for kernels found in its cache), before it is
 * optimized for the device; NULL: none. For checks of other renderers over every kernel a program makes
 * (tests/render_check.c renders each as CUDA C and compiles it with NVRTC). */
struct uop;
void engine_set_kernel_observer(void (*fn)(struct uop *ast));

/* kernels tg_realize launched on the device called name since the process started (as tg_stats' kernels_run,
 * JIT replays not counted); 0 (tg_error set) for an unknown name. For tests: a sharded step runs each device's kernels once */
uint64_t engine_kernels_run_on(const char *name);

/* true while a JIT step is being captured (host-side changes inside it would not be replayed) */
bool engine_capturing(void);

#endif
