// The caching allocator's private pools (caching_allocator.h: begin_allocate_to_pool and
// after): which pool an allocation is routed to, and how pools are named in messages.
#pragma once

#include "device/caching_allocator_state.h"

#include <string>

namespace backplane::npu::caching::detail {

// The private pool an allocation on `stream` goes to, or null: the latest open route whose
// filter passes. Under the mutex.
PrivatePool* routed_pool(Device& d, c10::Stream stream);
// {0, 0}: the general pool, not a private one.
bool is_general(c10::MempoolId_t id);
// "(a, b)", as messages name a pool.
std::string pool_id_text(c10::MempoolId_t id);

}  // namespace backplane::npu::caching::detail
