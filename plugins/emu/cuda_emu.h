// cuda_emu.h - just enough of the CUDA execution model to run plugins/src on a CPU, for tests on machines without
// a GPU (tests/test_kernels.py builds src/dflash_plugins.cu with `g++ -std=c++20 -DDFLASH_EMULATE`).
//
// Every CUDA thread of a block is a fiber (ucontext) on one OS thread; blocks run one after another (so `__shared__`
// can simply be `static`); __syncthreads is a barrier that, like CUDA's, stops counting threads that have returned;
// warp shuffles go through a per-warp exchange buffer between two warp barriers; atomics are std::atomic_ref; the float
// intrinsics are the IEEE host operations (build with -ffp-contract=off). logf / expf are glibc's, so results can
// differ from a GPU's by an ulp, exactly as the torch CPU reference can. This checks the kernels' logic (indexing,
// reductions, scans, selection, races at barrier granularity), not their speed or their PTX.
#pragma once

#include <ucontext.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};

struct __half {
  uint16_t bits;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __half2float(__half h) {
  _Float16 f;
  std::memcpy(&f, &h.bits, 2);
  return static_cast<float>(f);
}
inline float __bfloat162float(__nv_bfloat16 b) {
  const uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

namespace dflash_emu {

// Each CUDA thread of a block is a fiber (ucontext) run by one OS thread; a fiber runs until it waits at a barrier
// or returns, and a barrier opens when every fiber that has not returned waits at it (CUDA's rule for threads that
// exited). Blocks run one after another, so `__shared__` can simply be `static`.
enum class State { runnable, at_block_barrier, at_warp_barrier, done };

struct Fiber {
  ucontext_t context;
  std::unique_ptr<char[]> stack;  // uninitialised: zeroing 512 stacks per launch would dominate
  State state = State::runnable;
  uint3 thread{0, 0, 0};
};

struct ThreadState {  // what the running fiber sees as threadIdx / blockIdx / shared buffers
  uint3 thread{0, 0, 0}, block{0, 0, 0};
  uint64_t* warp_slots = nullptr;
  unsigned char* dynamic_shared = nullptr;
  Fiber* current = nullptr;
  ucontext_t* scheduler = nullptr;
  std::function<void()>* body = nullptr;
};
inline thread_local ThreadState tls;
inline dim3 g_block_dim, g_grid_dim;
inline std::mutex g_launch_mutex;
inline thread_local int g_last_error = 0;

inline unsigned lane() { return tls.thread.x % 32u; }

inline void wait_at(State barrier) {
  tls.current->state = barrier;
  swapcontext(&tls.current->context, tls.scheduler);
}

inline void fiber_main() {
  (*tls.body)();
  tls.current->state = State::done;  // returning resumes the scheduler through uc_link
}

template <typename T>
T shuffle(T v, unsigned src) {
  static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  uint64_t* slots = tls.warp_slots;
  slots[lane()] = bits;
  wait_at(State::at_warp_barrier);
  const uint64_t got = slots[src];
  wait_at(State::at_warp_barrier);
  T r;
  std::memcpy(&r, &got, sizeof(T));
  return r;
}

template <typename... KArgs>
struct Launcher {
  void (*kernel)(KArgs...);
  dim3 grid, block;
  size_t smem;

  template <typename... Args>
  void operator()(Args&&... args) const {
    std::lock_guard<std::mutex> guard(g_launch_mutex);
    g_grid_dim = grid;
    g_block_dim = block;
    const unsigned nthreads = block.x * block.y * block.z;
    const unsigned nwarps = (nthreads + 31) / 32;
    std::vector<unsigned char> dynamic(smem + 16);
    std::vector<uint64_t> slots(static_cast<size_t>(nwarps) * 32);
    std::vector<Fiber> fibers(nthreads);
    constexpr size_t kStack = 64 * 1024;
    for (auto& f : fibers) f.stack.reset(new char[kStack]);
    std::function<void()> body = [&] { kernel(args...); };
    ucontext_t scheduler;
    tls.scheduler = &scheduler;
    tls.body = &body;
    tls.dynamic_shared = dynamic.data();
    const uint64_t nblocks = static_cast<uint64_t>(grid.x) * grid.y * grid.z;
    for (uint64_t b = 0; b < nblocks; ++b) {
      tls.block = uint3{static_cast<unsigned>(b % grid.x), static_cast<unsigned>((b / grid.x) % grid.y),
                        static_cast<unsigned>(b / (static_cast<uint64_t>(grid.x) * grid.y))};
      for (unsigned t = 0; t < nthreads; ++t) {
        Fiber& f = fibers[t];
        f.state = State::runnable;
        f.thread = uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack.get();
        f.context.uc_stack.ss_size = kStack;
        f.context.uc_link = &scheduler;
        makecontext(&f.context, fiber_main, 0);
      }
      for (;;) {
        bool ran = false;
        for (unsigned t = 0; t < nthreads; ++t) {
          Fiber& f = fibers[t];
          if (f.state != State::runnable) continue;
          tls.current = &f;
          tls.thread = f.thread;
          tls.warp_slots = slots.data() + (t / 32) * 32;
          swapcontext(&scheduler, &f.context);
          ran = true;
        }
        bool live = false, all_at_block = true, released = false;
        for (unsigned w = 0; w < nwarps; ++w) {
          bool warp_live = false, all_at_warp = true;
          for (unsigned t = 32 * w; t < nthreads && t < 32 * (w + 1); ++t) {
            const State st = fibers[t].state;
            if (st == State::done) continue;
            live = warp_live = true;
            all_at_warp &= st == State::at_warp_barrier;
            all_at_block &= st == State::at_block_barrier;
          }
          if (warp_live && all_at_warp) {
            for (unsigned t = 32 * w; t < nthreads && t < 32 * (w + 1); ++t)
              if (fibers[t].state == State::at_warp_barrier) fibers[t].state = State::runnable;
            released = true;
          }
        }
        if (!live) break;
        if (all_at_block) {
          for (auto& f : fibers)
            if (f.state == State::at_block_barrier) f.state = State::runnable;
          released = true;
        }
        if (!ran && !released) {
          std::fprintf(stderr, "cuda_emu: deadlock in block %llu (threads wait at different barriers)\n",
                       static_cast<unsigned long long>(b));
          std::abort();
        }
      }
    }
  }
};

template <typename... KArgs>
Launcher<KArgs...> launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem) {
  return Launcher<KArgs...>{kernel, grid, block, smem};
}

}  // namespace dflash_emu

#define threadIdx (::dflash_emu::tls.thread)
#define blockIdx (::dflash_emu::tls.block)
#define blockDim (::dflash_emu::g_block_dim)
#define gridDim (::dflash_emu::g_grid_dim)

inline void __syncthreads() { ::dflash_emu::wait_at(::dflash_emu::State::at_block_barrier); }

template <typename T>
T __shfl_xor_sync(unsigned, T v, int offset) {
  return ::dflash_emu::shuffle(v, ::dflash_emu::lane() ^ static_cast<unsigned>(offset));
}
template <typename T>
T __shfl_down_sync(unsigned, T v, unsigned offset) {
  const unsigned src = ::dflash_emu::lane() + offset;
  return ::dflash_emu::shuffle(v, src < 32 ? src : ::dflash_emu::lane());
}

template <typename T>
T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}
template <typename T>
T atomicMin(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
template <typename T>
T atomicMax(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v > old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

template <typename T>
T __ldg(const T* p) {
  return *p;
}
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline unsigned long long __float2ull_rn(float x) { return static_cast<unsigned long long>(std::nearbyint(x)); }

// ---- the runtime API the entry points use -------------------------------------------------------------------------
typedef int cudaError_t;
typedef void* cudaStream_t;
enum : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoKernelImageForDevice = 209,
};
struct cudaFuncAttributes {
  int maxThreadsPerBlock;
};
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }
inline const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
inline cudaError_t cudaGetLastError() {
  const cudaError_t e = ::dflash_emu::g_last_error;
  ::dflash_emu::g_last_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
template <typename F>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, F) {
  attr->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
