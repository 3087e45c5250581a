// How Python (and a C++ host) reaches the npu's c10d backend without this library linking
// Python: two operators on the dispatcher. c10d registers ProcessGroup with TorchScript's
// class registry, so an operator can take one: Python boxes a group that carries gloo for
// the CPU (ProcessGroup.boxed()), `attach` makes a HostStagedBackend over that gloo the
// group's backend for npu and CPU tensors, and Python hands the group to c10d
// (backplane_npu/_collectives.py).
#include "collectives/process_group.h"

#include "device/npu_stream.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/library.h>

namespace backplane::npu::collectives {
namespace {

void attach(const c10::intrusive_ptr<c10d::ProcessGroup>& group, std::string name, bool synchronous) {
  TORCH_CHECK(group->hasBackendForDeviceType(c10::DeviceType::CPU),
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

// [device index, stream id] of the group's communication stream; [] before its first
// collective. Tests hold that stream to show that collectives run there.
std::vector<int64_t> comm_stream(const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
  TORCH_CHECK(group->hasBackendForDeviceType(kNpu), "backplane npu: comm_stream expected a group with an npu "
              "backend; the group has none");
  auto* backend = dynamic_cast<HostStagedBackend*>(group->getBackend(kNpu).get());
  TORCH_CHECK(backend != nullptr, "backplane npu: comm_stream expected the group's npu backend to be this plugin's; "
              "got ", group->getBackend(kNpu)->getBackendName());
  const auto stream = backend->comm_stream();
  if (!stream) return {};
  return {stream->device_index(), stream->id()};
}

}  // namespace

TORCH_LIBRARY(backplane_npu_collectives, m) {
  m.def("attach(__torch__.torch.classes.c10d.ProcessGroup group, str name, bool synchronous) -> ()", &attach);
  m.def("comm_stream(__torch__.torch.classes.c10d.ProcessGroup group) -> int[]", &comm_stream);
}

}  // namespace backplane::npu::collectives
