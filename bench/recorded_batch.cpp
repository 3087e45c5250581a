#include "recorded_batch.h"

#include "cuda_module.h"

#include <array>
#include <stdexcept>
#include <string>

namespace backplane::bench {
namespace {

RecordCudaGraphFn load_entry_point() {
  static const auto entry = reinterpret_cast<RecordCudaGraphFn>(cuda_module_symbol(kRecordCudaGraphSymbol));
  return entry;
}

}  // namespace

void require_cuda_graph_module() { load_entry_point(); }

std::unique_ptr<RecordedBatch> record_cuda_graph(c10::Device device, const std::function<void()>& step,
                                                 int64_t calls, const std::function<void()>& before_each_replay) {
  if (!device.is_cuda())
    throw std::runtime_error("a CUDA graph records CUDA work only, found device " + device.str());
  std::array<char, kCudaModuleErrorSize> error{};
  RecordedBatch* batch = load_entry_point()(device.index(), &step, calls,
                                            before_each_replay ? &before_each_replay : nullptr, error.data(),
                                            error.size());
  if (batch == nullptr) throw std::runtime_error(std::string("cannot record as a CUDA graph: ") + error.data());
  return std::unique_ptr<RecordedBatch>(batch);
}

}  // namespace backplane::bench
