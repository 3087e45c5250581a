// Resizing npu storage: allocate, copy the old bytes in stream order, swap.
#pragma once

#include <c10/core/StorageImpl.h>

namespace backplane::npu {

void resize_bytes(c10::StorageImpl* storage, size_t bytes);

}  // namespace backplane::npu
