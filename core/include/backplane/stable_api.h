/* The core's C interface for kernel plugins on PyTorch's stable ABI (docs/shipping-a-plugin.md).
 *
 * A stable plugin is built once, against torch/csrc/stable and torch/headeronly with
 * TORCH_TARGET_VERSION, and runs under that torch and every later one. The core is built
 * for one torch; between the two only C types cross: this header's structs, function
 * pointers, and the stable shim's tensor handles (AtenTensorHandle, borrowed).
 *
 * Versioning, as PJRT does it: fields are only ever appended, never changed or removed;
 * each struct starts with its size, so either side reads only the fields the other has.
 * BACKPLANE_STABLE_API_VERSION counts the additions.
 *
 * How a plugin meets the core: it exports backplane_stable_plugin_init (stable_kernel.h
 * defines it); the loader opens the library, then calls it with the core's interface
 * while the plugin counts as loading, so each kernel it offers is checked against its
 * manifest and registered through the core's per-op selection (selection.h), as a
 * full-ABI plugin's kernels are. The core runs the op contract (registry dtypes, one
 * device, the shape rule), allocates the outputs, skips calls with nothing to compute and
 * holds the device guard; the kernel gets [outputs..., arguments...] and computes.
 */
#ifndef BACKPLANE_STABLE_API_H_
#define BACKPLANE_STABLE_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BACKPLANE_STABLE_API_VERSION 1

/* What the core hands each call besides the values. */
typedef struct BackplaneStableCall {
  uint64_t struct_size;
  int32_t device_type;  /* c10::DeviceType: 0 CPU, 1 CUDA, 20 PrivateUse1 */
  int32_t device_index; /* -1 on the CPU */
  void* stream;         /* the device's current stream (cudaStream_t on CUDA); NULL on the CPU */
} BackplaneStableCall;

/* A kernel. stack: the outputs the core allocated, then the op's arguments, in schema
 * order: a Tensor as its AtenTensorHandle's bits (borrowed: never deleted by the kernel),
 * an int as int64_t, a float as a double's bits, a bool as 0 or 1. Returns NULL, or an
 * error message owned by the plugin (valid until its next call on this thread). */
typedef const char* (*BackplaneStableKernel)(const BackplaneStableCall* call, const uint64_t* stack,
                                             uint64_t num_outputs, uint64_t num_args);

typedef struct BackplaneStableApi {
  uint64_t struct_size;
  uint32_t version; /* BACKPLANE_STABLE_API_VERSION of the core */
  uint32_t reserved;
  /* Offers fn for op ("backplane::mul", a plugin's own "acme::fused_gelu") on dispatch_key
   * ("CPU", "CUDA"). torch_target_version: the plugin's TORCH_TARGET_VERSION. Returns 0, or
   * nonzero with last_error() saying why (an op the registry lacks, an argument type the
   * stable path does not carry). */
  int32_t (*offer_kernel)(const char* op, const char* dispatch_key, BackplaneStableKernel fn,
                          uint64_t torch_target_version);
  const char* (*last_error)(void);
} BackplaneStableApi;

/* What a stable plugin exports: called once by the loader with the core's interface.
 * Returns NULL, or an error message (the plugin is then reported failed, with it). */
typedef const char* (*BackplaneStablePluginInit)(const BackplaneStableApi* api);
#define BACKPLANE_STABLE_PLUGIN_INIT "backplane_stable_plugin_init"

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_STABLE_API_H_ */
