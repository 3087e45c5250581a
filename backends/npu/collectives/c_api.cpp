// How Python (or a C++ host) gives a process group the npu's c10d backend, through two C
// functions and no operator: the project's schemas are the registry's alone, and this is
// plumbing, not an op a user calls. The library does not link Python, so a group crosses
// over by name: the caller registers it in c10d's group registry (Python's
// `_register_process_group`, C++'s c10d::register_process_group), and these look it up
// there (c10d::resolve_process_group). backplane_npu/_collectives.py registers each group
// under a name of its own for the call and removes it after.
//
// Limits: a group must be registered on the calling thread's registry (c10d's thread
// isolation mode gives each thread one); the functions touch no Python object, so ctypes
// may release the GIL around them.
#include "collectives/process_group.h"

#include "device/c_api.h"
#include "device/npu_stream.h"

#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <string>

namespace backplane::npu::collectives {
namespace {

c10::intrusive_ptr<c10d::ProcessGroup> registered_group(const char* function, const char* group_name) {
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  try {
    group = c10d::resolve_process_group(group_name);
  } catch (const c10::Error&) {  // torch's own words differ between releases; ours name the function
    group = nullptr;
  }
  TORCH_CHECK(group, "backplane npu: ", function, " expected a process group registered under the name '", group_name,
              "' in c10d's group registry; found none");
  return group;
}

// ProcessGroup::hasBackendForDeviceType is torch >= 2.12; getBackend throws where there is none.
bool has_backend(c10d::ProcessGroup& group, c10::DeviceType type) {
  try {
    return group.getBackend(type).defined();
  } catch (const c10::Error&) {
    return false;
  }
}

void attach(const char* group_name, std::string name, bool synchronous) {
  const auto group = registered_group("attach", group_name);
  TORCH_CHECK(has_backend(*group, c10::DeviceType::CPU),
              "backplane npu: attach expected a group with a backend for CPU tensors (gloo) to run the collectives "
              "on; the group has none");
  auto backend = c10::make_intrusive<HostStagedBackend>(group->getBackend(c10::DeviceType::CPU), std::move(name),
                                                       synchronous);
  // Both devices: CPU collectives then take the same stream, in issue order with the npu
  // ones (torch 2.14's init_process_group() with no backend named makes a group for the
  // accelerator alone, so c10d would give CPU tensors no backend at all).
  group->setBackend(kNpu, c10d::ProcessGroup::BackendType::CUSTOM, backend);
  group->setBackend(c10::DeviceType::CPU, c10d::ProcessGroup::BackendType::CUSTOM, backend);
  group->setDefaultBackend(c10d::ProcessGroup::BackendType::CUSTOM);
}

std::optional<c10::Stream> comm_stream(const char* group_name) {
  const auto group = registered_group("comm_stream", group_name);
  TORCH_CHECK(has_backend(*group, kNpu), "backplane npu: comm_stream expected a group with an npu "
              "backend; the group has none");
  auto* backend = dynamic_cast<HostStagedBackend*>(group->getBackend(kNpu).get());
  TORCH_CHECK(backend != nullptr, "backplane npu: comm_stream expected the group's npu backend to be this plugin's; "
              "got ", group->getBackend(kNpu)->getBackendName());
  return backend->comm_stream();
}

}  // namespace
}  // namespace backplane::npu::collectives

// Makes a HostStagedBackend over the CPU backend (gloo) of the group registered as
// `group_name` that group's backend for npu and CPU tensors, named `backend_name`
// (what the group reports); `synchronous` != 0: the host waits for each collective.
BACKPLANE_NPU_C_API int backplane_npu_collectives_attach(const char* group_name, const char* backend_name,
                                                         int synchronous, char* message, size_t size) {
  return backplane::npu::guarded(message, size, [&] {
    backplane::npu::collectives::attach(group_name, backend_name, synchronous != 0);
  });
}

// The communication stream of the npu backend of the group registered as `group_name`:
// *bound = 0 before its first collective (no stream yet), else 1 with its device index
// and stream id. Tests hold that stream to show that collectives run there.
BACKPLANE_NPU_C_API int backplane_npu_collectives_comm_stream(const char* group_name, int* bound, int* device,
                                                              int64_t* stream_id, char* message, size_t size) {
  return backplane::npu::guarded(message, size, [&] {
    const auto stream = backplane::npu::collectives::comm_stream(group_name);
    *bound = stream.has_value() ? 1 : 0;
    if (stream) *device = stream->device_index(), *stream_id = stream->id();
  });
}
