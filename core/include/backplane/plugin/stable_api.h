/* The core's C interface for kernel plugins on PyTorch's stable ABI (docs/shipping-a-plugin.md).
 *
 * A stable plugin is built once, against torch/csrc/stable and torch/headeronly with
 * TORCH_TARGET_VERSION, and runs under that torch and every later one. The core is built
 * for one torch; between the two only C types cross: this header's structs, function
 * pointers, and the stable shim's tensor handles (AtenTensorHandle, borrowed).
 *
 * Versioning, as PJRT does it: fields are only ever appended, never changed or removed;
 * each struct starts with its size, so either side reads only the fields the other has.
 * BACKPLANE_STABLE_API_VERSION counts the additions:
 *   1  offer_kernel: Tensor, int, float and bool arguments; only their count is checked.
 *   2  offer_typed_kernel: the kernel's parameter kinds travel with it and the core checks
 *      each against the op's schema (a double read as an int64's bits never happens);
 *      Scalar and int[] arguments cross, as BackplaneStableScalar and BackplaneStableIntList.
 * A plugin built against version 2 offers through offer_typed_kernel where the core has
 * it, and through offer_kernel on a version-1 core where its kernel needs no version-2
 * kind (else it is refused, naming the versions). A core never hands a kernel a kind the
 * kernel did not declare, so older plugins keep loading unchanged.
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

#define BACKPLANE_STABLE_API_VERSION 2

/* What the core hands each call besides the values. */
typedef struct BackplaneStableCall {
  uint64_t struct_size;
  int32_t device_type;  /* c10::DeviceType: 0 CPU, 1 CUDA, 20 PrivateUse1 */
  int32_t device_index; /* -1 on the CPU */
  void* stream;         /* the device's current stream (cudaStream_t on CUDA); NULL on the CPU */
} BackplaneStableCall;

/* The kinds of value a kernel's parameter takes (version 2). */
typedef enum BackplaneStableKind {
  BACKPLANE_STABLE_TENSOR = 1,
  BACKPLANE_STABLE_INT = 2,
  BACKPLANE_STABLE_FLOAT = 3,
  BACKPLANE_STABLE_BOOL = 4,
  BACKPLANE_STABLE_SCALAR = 5,  /* schema Scalar */
  BACKPLANE_STABLE_INT_LIST = 6 /* schema int[] and int[N] */
} BackplaneStableKind;

/* A Scalar argument (version 2), as c10::Scalar holds one; a complex Scalar is refused by
 * the core before the call. */
typedef enum BackplaneStableScalarType {
  BACKPLANE_STABLE_SCALAR_DOUBLE = 0, /* bits: a double's */
  BACKPLANE_STABLE_SCALAR_INT = 1,    /* bits: an int64_t's */
  BACKPLANE_STABLE_SCALAR_BOOL = 2    /* bits: 0 or 1 */
} BackplaneStableScalarType;

typedef struct BackplaneStableScalar {
  int32_t type; /* BackplaneStableScalarType */
  int32_t reserved;
  uint64_t bits;
} BackplaneStableScalar;

/* An int[] argument (version 2): the core's values, alive for the call. */
typedef struct BackplaneStableIntList {
  const int64_t* data;
  uint64_t size;
} BackplaneStableIntList;

/* A kernel. stack: the outputs the core allocated, then the op's arguments, in schema
 * order: a Tensor as its AtenTensorHandle's bits (borrowed: never deleted by the kernel),
 * an int as int64_t, a float as a double's bits, a bool as 0 or 1, a Scalar and an int[]
 * as the address of the core's BackplaneStableScalar or BackplaneStableIntList (borrowed,
 * for the call). Returns NULL, or an error message owned by the plugin (valid until its
 * next call on this thread). */
typedef const char* (*BackplaneStableKernel)(const BackplaneStableCall* call, const uint64_t* stack,
                                             uint64_t num_outputs, uint64_t num_args);

/* A kernel offered with its parameter kinds (version 2). */
typedef struct BackplaneStableKernelInfo {
  uint64_t struct_size;
  const char* op;           /* "backplane::add", a plugin's own "acme::fused_gelu" */
  const char* dispatch_key; /* "CPU", "CUDA" */
  BackplaneStableKernel fn;
  uint64_t torch_target_version; /* the plugin's TORCH_TARGET_VERSION */
  uint32_t num_outputs;          /* the outputs it takes first (0 for an op that writes its argument) */
  uint32_t num_params;           /* the op arguments it takes after them */
  const int32_t* param_kinds;    /* BackplaneStableKind of each, in schema order */
} BackplaneStableKernelInfo;

typedef struct BackplaneStableApi {
  uint64_t struct_size;
  uint32_t version; /* BACKPLANE_STABLE_API_VERSION of the core */
  uint32_t reserved;
  /* Version 1 (what plugins built against version 1 call): offers fn for op
   * ("backplane::mul", a plugin's own "acme::fused_gelu") on dispatch_key ("CPU", "CUDA").
   * torch_target_version: the plugin's TORCH_TARGET_VERSION. Returns 0, or nonzero with
   * last_error() saying why (an op the registry lacks, an argument other than Tensor, int,
   * float or bool). */
  int32_t (*offer_kernel)(const char* op, const char* dispatch_key, BackplaneStableKernel fn,
                          uint64_t torch_target_version);
  const char* (*last_error)(void);

  /* Version 2: offers a kernel with its parameter kinds. Refused (nonzero, last_error()
   * saying why) where its outputs or any parameter's kind differ from the op's schema,
   * naming the argument, besides offer_kernel's reasons. */
  int32_t (*offer_typed_kernel)(const BackplaneStableKernelInfo* kernel);
} BackplaneStableApi;

/* What a stable plugin exports: called once by the loader with the core's interface.
 * Returns NULL, or an error message (the plugin is then reported failed, with it). */
typedef const char* (*BackplaneStablePluginInit)(const BackplaneStableApi* api);
#define BACKPLANE_STABLE_PLUGIN_INIT "backplane_stable_plugin_init"

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_STABLE_API_H_ */
