// The npu device from C++ alone (libtorch + the plugin, no Python): what a C++
// deployment sees. Loaded through the loader like any backend.
#include <backplane/loader.h>
#include "plugins/manifest.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <gtest/gtest.h>

#include <dlfcn.h>

namespace {

const c10::Device npu0(c10::DeviceType::PrivateUse1, 0), npu1(c10::DeviceType::PrivateUse1, 1);

class NpuDevice : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    backplane::LoadOptions options;
    options.dir = BACKPLANE_PLUGIN_DIR;
    record_ = backplane::load("npu", options);
  }
  // A function of the plugin's C interface (the plugin is opened RTLD_LOCAL).
  template <typename Fn>
  static Fn* c_api(const char* name) {
    void* handle = dlopen(record_.path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    EXPECT_NE(handle, nullptr);
    return reinterpret_cast<Fn*>(dlsym(handle, name));
  }
  static at::Tensor call(const char* op, const at::Tensor& a, const at::Tensor& b) {
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(op, "");
    return handle.typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>().call(a, b, 1);
  }
  static inline backplane::BackendRecord record_;
};

TEST_F(NpuDevice, IsRegisteredAsNpu) {
  EXPECT_EQ(record_.dispatch_key, "PrivateUse1");
  // What its build recorded, no list here: the registry is the only one.
  EXPECT_EQ(record_.ops, backplane::read_manifest(std::string(BACKPLANE_PLUGIN_DIR) + "/libbackplane_npu.manifest.yaml").ops);
  EXPECT_FALSE(record_.ops.empty());
  EXPECT_EQ(c10::get_privateuse1_backend(), "npu");
  EXPECT_EQ(c10::Device("npu:1"), npu1);
  EXPECT_EQ(c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->deviceCount(), 2);
  EXPECT_TRUE(at::detail::getPrivateUse1Hooks().isAvailable());
}

TEST_F(NpuDevice, LoadingTwiceIsHarmless) {
  backplane::LoadOptions options;
  options.dir = BACKPLANE_PLUGIN_DIR;
  EXPECT_EQ(backplane::load("npu", options).path, record_.path);
  EXPECT_EQ(at::ones({2}, npu0).sum().item<float>(), 2.0f);
}

TEST_F(NpuDevice, RoundTripsThroughBothDevices) {
  const at::Tensor host = at::arange(24, at::kFloat).view({4, 6});
  const at::Tensor on0 = host.to(npu0);
  EXPECT_EQ(on0.device(), npu0);
  const at::Tensor on1 = on0.t().to(npu1);  // a transposed view, across devices
  EXPECT_EQ(on1.device(), npu1);
  EXPECT_TRUE(on1.cpu().equal(host.t()));
  // Device memory is the device's: the hooks know its device from the pointer.
  EXPECT_EQ(at::detail::getPrivateUse1Hooks().getDeviceFromPtr(on1.data_ptr()), npu1);
}

TEST_F(NpuDevice, RegistryOpMatchesCpu) {
  const at::Tensor a = at::randn({3, 5}), b = at::randn({5});
  const at::Tensor got = call("backplane::add", a.to(npu1), b.to(npu1));
  EXPECT_EQ(got.device(), npu1);
  EXPECT_TRUE(at::allclose(got.cpu(), a + b));
}

TEST_F(NpuDevice, MixingDevicesIsRefused) {
  try {
    call("backplane::add", at::ones({3}, npu0), at::ones({3}));
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("backplane::add: arguments 'a' and 'b' must be on one device, found npu:0 and cpu"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(NpuDevice, FallbackRunsAndBlocklistRefuses) {
  EXPECT_TRUE(at::full({4}, 2.5, at::TensorOptions().device(npu0)).cos().cpu().equal(at::full({4}, 2.5).cos()));
  // Convolutions have no npu kernel and must not silently run on the host.
  const at::Tensor image = at::ones({1, 1, 4, 4}, npu0), filter = at::ones({1, 1, 3, 3}, npu0);
  EXPECT_THROW(at::conv2d(image, filter), c10::NotImplementedError);
}

// Matrix products run on the device (backends/npu/aten/matmul.cpp), with PyTorch's size
// checks at the call and the values of the CPU's.
TEST_F(NpuDevice, MatrixProductsRunOnTheDevice) {
  const at::Tensor a = at::randn({5, 7}), b = at::randn({7, 3}), bias = at::randn({3});
  const at::Tensor a3 = at::randn({2, 5, 7}), b3 = at::randn({2, 7, 3});
  EXPECT_TRUE(at::allclose(at::mm(a.to(npu0), b.to(npu0)).cpu(), at::mm(a, b)));
  EXPECT_TRUE(at::allclose(at::addmm(bias.to(npu0), a.to(npu0), b.to(npu0), 0.5, 2.0).cpu(), at::addmm(bias, a, b, 0.5, 2.0)));
  EXPECT_TRUE(at::allclose(at::bmm(a3.to(npu0), b3.to(npu0)).cpu(), at::bmm(a3, b3)));
  EXPECT_TRUE(at::allclose(at::matmul(a3.to(npu0), b.to(npu0)).cpu(), at::matmul(a3, b)));
  const at::Tensor t = a.to(npu0).t();  // a transposed view is read in place
  EXPECT_TRUE(at::allclose(at::mm(t, a.to(npu0)).cpu(), at::mm(a.t(), a)));
  try {
    at::mm(a.to(npu0), a.to(npu0));
    FAIL() << "expected a size error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be multiplied (5x7 and 5x7)"), std::string::npos) << e.what();
  }
  try {
    at::mm(a.to(npu0), b);
    FAIL() << "expected a device error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("aten::mm: argument 'mat2' is on cpu, expected npu:0"), std::string::npos)
        << e.what();
  }
}

TEST_F(NpuDevice, OpsRunOnTheCurrentStream) {
  auto* hold = c_api<int(int, void**, char*, size_t)>("backplane_npu_hold_current_stream");
  auto* release = c_api<int(void*)>("backplane_npu_release");
  ASSERT_NE(hold, nullptr);
  const at::Tensor x = at::arange(8, at::kFloat).to(npu0);
  auto* guard = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  const c10::Stream side = guard->getNewStream(npu0);
  at::Tensor y;
  {
    const c10::StreamGuard on_side(side);
    void* h = nullptr;
    char message[256] = "";
    ASSERT_EQ(hold(0, &h, message, sizeof message), 0) << message;  // the side stream: current now
    y = at::empty({8}, npu0);
    y.copy_(x);  // npu to npu: queued, never waits
    EXPECT_FALSE(guard->queryStream(side));
    EXPECT_TRUE(guard->queryStream(guard->getDefaultStream(npu0)));
    release(h);
    guard->synchronizeStream(side);
  }
  EXPECT_TRUE(y.cpu().equal(at::arange(8, at::kFloat)));
}

TEST_F(NpuDevice, GuardAndHooksNameWhatWasExpected) {
  auto* guard = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const c10::Error& e) {
      return e.what_without_backtrace();
    }
    return "no error";
  };
  EXPECT_EQ(message([&] { guard->getDefaultStream(c10::Device(c10::kCPU)); }),
            "backplane npu: expected an npu device, got cpu");
  EXPECT_EQ(message([&] { guard->queryStream(c10::Stream(c10::Stream::UNSAFE, npu0, 99)); }),
            "backplane npu: unknown stream id 99; expected 0 to 4");
  EXPECT_EQ(message([&] { guard->setDevice(c10::Device(c10::DeviceType::PrivateUse1, 7)); }),
            "backplane npu: device index 7 out of range; expected 0 <= index < 2");
  void* event = nullptr;
  EXPECT_EQ(message([&] { guard->record(&event, guard->getDefaultStream(npu0), 1, c10::EventFlag::PYTORCH_DEFAULT); }),
            "backplane npu: event of npu:1 cannot be recorded on a stream of npu:0");
  void* timed = nullptr;
  guard->record(&event, guard->getDefaultStream(npu0), 0, c10::EventFlag::PYTORCH_DEFAULT);
  guard->record(&timed, guard->getDefaultStream(npu0), 0, c10::EventFlag::BACKEND_DEFAULT);
  guard->synchronizeDevice(0);
  EXPECT_EQ(message([&] { guard->elapsedTime(timed, event, 0); }),
            "backplane npu: elapsed_time needs both events created with enable_timing=True and recorded");
  guard->destroyEvent(event, 0);
  guard->destroyEvent(timed, 0);
  int on_host = 0;
  EXPECT_NE(message([&] { at::detail::getPrivateUse1Hooks().getDeviceFromPtr(&on_host); })
                .find(" is not npu device memory"),
            std::string::npos);
}

// c10 declares getStream and exchangeStream noexcept: a check that threw there ended
// the process. A bad index or id is accepted there and refused where it is used.
TEST_F(NpuDevice, NoexceptGuardFunctionsNeverAbort) {
  auto* guard = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const c10::Error& e) {
      return e.what_without_backtrace();
    }
    return "no error";
  };
  const c10::Device npu9(c10::DeviceType::PrivateUse1, 9);
  const c10::Stream on9 = guard->getStream(npu9);
  EXPECT_EQ(on9.device(), npu9);
  EXPECT_EQ(message([&] { guard->synchronizeStream(on9); }),
            "backplane npu: device index 9 out of range; expected 0 <= index < 2");
  const c10::Stream bad(c10::Stream::UNSAFE, npu0, 99);
  const c10::Stream previous = guard->exchangeStream(bad);
  EXPECT_EQ(message([&] { at::ones({2}, npu0); }), "backplane npu: unknown stream id 99; expected 0 to 4");
  EXPECT_EQ(guard->exchangeStream(previous), bad);
  EXPECT_EQ(guard->exchangeStream(c10::Stream(c10::Stream::UNSAFE, npu9, 0)).device(), npu9);  // nothing changed
  EXPECT_EQ(at::ones({2}, npu0).sum().item<float>(), 2.0f);
}

// A leak in the allocator or in tensors freed by stream workers shows up as live
// bytes after many rounds; the peak proves the rounds went through this allocator.
TEST_F(NpuDevice, AllocatorKeepsNoLiveBytesAfter10000Rounds) {
  auto* stats = c_api<int(int, int64_t*, char*, size_t)>("backplane_npu_memory_stats");
  char message[256] = "";
  auto* guard = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  guard->synchronizeDevice(1);
  int64_t before[3], after[3];
  ASSERT_EQ(stats(1, before, message, sizeof message), 0) << message;
  for (int round = 0; round < 10000; ++round) {
    at::Tensor t = at::empty({1 + round % 64}, npu1);
    if (round % 2) t.fill_(1.0f);  // queued on a worker, which may drop the last reference
  }
  guard->synchronizeDevice(1);
  ASSERT_EQ(stats(1, after, message, sizeof message), 0) << message;
  EXPECT_EQ(after[0], before[0]) << "bytes still allocated";
  EXPECT_EQ(after[2], before[2]) << "allocations still live";
  EXPECT_GE(after[1], before[0] + 4) << "the peak never moved: the rounds did not allocate here";
}

// Leaves work queued on purpose: the process must still exit cleanly (the runtime
// drains its queues at exit).
TEST_F(NpuDevice, ExitWithQueuedWorkIsClean) {
  at::Tensor x = at::randn({1000, 4000}).to(npu0);
  const at::Tensor w = at::ones({4000}, npu0);
  auto rms_norm = c10::Dispatcher::singleton().findSchemaOrThrow("backplane::rms_norm", "")
                      .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  for (int i = 0; i < 20; ++i) x = rms_norm.call(x, w, 1e-6);
}

}  // namespace
