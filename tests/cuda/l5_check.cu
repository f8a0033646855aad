// SPDX-License-Identifier: BSD-3-Clause
/// @file Contract level L5: the RNG, the conversions, the keyed permutation and reprosgd::math give the same bits on a CUDA GPU as on the host.
///
/// A standalone CUDA program (no Kokkos, not part of the CMake build). Build and run on a GPU machine:
///
///   nvcc -std=c++20 --fmad=false -Xcompiler -ffp-contract=off -arch=sm_90 \
///        -I include -I tests/cuda/shim tests/cuda/l5_check.cu -o l5_check && ./l5_check
///
/// (tests/cuda/shim provides KOKKOS_INLINE_FUNCTION = __host__ __device__ inline for headers that
/// include <Kokkos_Macros.hpp>.) Every result is computed by a kernel and by the host, and the bits
/// are compared; it prints "L5 check: N mismatches" and exits 1 when N > 0, 2 on a CUDA error.
/// An optional argument names a KAT file to use instead of the embedded copy of Random123's vectors.
#ifndef KOKKOS_INLINE_FUNCTION
#define KOKKOS_INLINE_FUNCTION __host__ __device__ inline
#endif

#include <reprosgd/data/keyed_permutation.hpp>
#include <reprosgd/math/elementary.hpp>
#include <reprosgd/rng/distributions.hpp>
#include <reprosgd/rng/philox.hpp>
#include <reprosgd/rng/philox_stream.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

// A copy of shared/data/philox_kat_vectors.txt (Random123's published vectors), so the program
// needs no data files on the GPU machine.
const char* const embedded_kat = R"KAT(# Known-answer vectors for the Philox counter-based generators, as published with
# Random123 (D. E. Shaw Research, tests/kat_vectors; Salmon et al., "Parallel random
# numbers: as easy as 1, 2, 3", SC'11).
# Columns: name, rounds, CTR words, KEY words, EXPECTED output words (all hexadecimal).
#nameNxW  R  CTR                                 KEY                                   EXPECTED
philox2x32 7 00000000 00000000 00000000   257a3673 cd26be2a
philox2x32 7 ffffffff ffffffff ffffffff   ab302c4d 3dc9d239
philox2x32 7 243f6a88 85a308d3 13198a2e   bedbbe6b e4c770b3
philox2x32 10 00000000 00000000 00000000   ff1dae59 6cd10df2
philox2x32 10 ffffffff ffffffff ffffffff   2c3f628b ab4fd7ad
philox2x32 10 243f6a88 85a308d3 13198a2e   dd7ce038 f62a4c12
philox2x64 7 0000000000000000 0000000000000000 0000000000000000   b41da69fbfefc666 511e9ce1a5534056
philox2x64 7 ffffffffffffffff ffffffffffffffff ffffffffffffffff   a4696cc04462015d 724782dae17169e9
philox2x64 7 243f6a8885a308d3 13198a2e03707344 a4093822299f31d0   98ed1534392bf372 67528b1568882fd5
philox2x64 10 0000000000000000 0000000000000000 0000000000000000   ca00a0459843d731 66c24222c9a845b5
philox2x64 10 ffffffffffffffff ffffffffffffffff ffffffffffffffff   65b021d60cd8310f 4d02f3222f86df20
philox2x64 10 243f6a8885a308d3 13198a2e03707344 a4093822299f31d0   0a5e742c2997341c b0f883d38000de5d
philox4x32 7 00000000 00000000 00000000 00000000 00000000 00000000   5f6fb709 0d893f64 4f121f81 4f730a48
philox4x32 7 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   5207ddc2 45165e59 4d8ee751 8c52f662
philox4x32 7 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   4dfccaba 190a87f0 c47362ba b6b5242a
philox4x32 10 00000000 00000000 00000000 00000000 00000000 00000000   6627e8d5 e169c58d bc57ac4c 9b00dbd8
philox4x32 10 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   408f276d 41c83b0e a20bc7c6 6d5451fd
philox4x32 10 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   d16cfe09 94fdcceb 5001e420 24126ea1
philox4x64 7 0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000   5dc8ee6268ec62cd 139bc570b6c125a0 84d6deb4fb65f49e aff7583376d378c2
philox4x64 7 ffffffffffffffff ffffffffffffffff ffffffffffffffff ffffffffffffffff ffffffffffffffff ffffffffffffffff   071dd84367903154 48e2bbdc722b37d1 6afa9890bb89f76c 9194c8d8ada56ac7
philox4x64 7 243f6a8885a308d3 13198a2e03707344 a4093822299f31d0 082efa98ec4e6c89 452821e638d01377 be5466cf34e90c6c   513a366704edf755 f05d9924c07044d3 bef2cb9cbea74c6c 8db948de4caa1f8a
philox4x64 10 0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000 0000000000000000   16554d9eca36314c db20fe9d672d0fdc d7e772cee186176b 7e68b68aec7ba23b
philox4x64 10 ffffffffffffffff ffffffffffffffff ffffffffffffffff ffffffffffffffff ffffffffffffffff ffffffffffffffff   87b092c3013fe90b 438c3c67be8d0224 9cc7d7c69cd777b6 a09caebf594f0ba0
philox4x64 10 243f6a8885a308d3 13198a2e03707344 a4093822299f31d0 082efa98ec4e6c89 452821e638d01377 be5466cf34e90c6c   a528f45403e61d95 38c72dbd566e9788 a5a1610e72fd18b5 57bd43b5e52b7fe6
)KAT";

#define CUDA_CHECK(call)                                                                      \
  do {                                                                                        \
    cudaError_t err_ = (call);                                                                \
    if (err_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "l5_check: %s failed: %s\n", #call, cudaGetErrorString(err_));     \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  std::size_t n = 0;
  explicit DeviceArray(std::size_t count) : n(count) { CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(T))); }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> to_host() const {
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  void from_host(const std::vector<T>& h) {
    CUDA_CHECK(cudaMemcpy(ptr, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
};

__host__ __device__ inline std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
__host__ __device__ inline float bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

long total_mismatches = 0;

template <class T>
long report(const char* what, const std::vector<T>& device, const std::vector<T>& host) {
  long bad = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < host.size(); ++i)
    if (device[i] != host[i]) {
      if (bad == 0) first = i;
      ++bad;
    }
  std::printf("  %-34s %10zu values  %8ld mismatches", what, host.size(), bad);
  if (bad) std::printf("  (first at %zu: device %llx host %llx)", first, (unsigned long long)device[first],
                       (unsigned long long)host[first]);
  std::printf("\n");
  total_mismatches += bad;
  return bad;
}

// ---- 1. Philox known answers ---------------------------------------------------------------
struct Kat {
  int gen;  // 0: 2x32, 1: 4x32, 2: 2x64, 3: 4x64
  unsigned rounds;
  int n;
  std::uint64_t ctr[4], key[2], expected[4];
};

std::vector<Kat> parse_kat(const std::string& text, int& lines) {
  std::vector<Kat> out;
  std::istringstream in(text);
  std::string line;
  lines = 0;
  while (std::getline(in, line)) {
    const auto p = line.find_first_not_of(" \t\r");
    if (p == std::string::npos || line[p] == '#') continue;
    ++lines;
    std::istringstream ls(line);
    std::string name;
    Kat k{};
    ls >> name >> k.rounds;
    if (name == "philox2x32") k.gen = 0, k.n = 2;
    else if (name == "philox4x32") k.gen = 1, k.n = 4;
    else if (name == "philox2x64") k.gen = 2, k.n = 2;
    else if (name == "philox4x64") k.gen = 3, k.n = 4;
    else continue;  // counted in `lines`, so the count check catches it
    ls >> std::hex;
    for (int i = 0; i < k.n; ++i) ls >> k.ctr[i];
    for (int i = 0; i < k.n / 2; ++i) ls >> k.key[i];
    for (int i = 0; i < k.n; ++i) ls >> k.expected[i];
    if (ls.fail() || (k.rounds != 7 && k.rounds != 10)) continue;
    out.push_back(k);
  }
  return out;
}

template <unsigned R>
__host__ __device__ void kat_rounds(const Kat& k, std::uint64_t* out) {
  using U = std::uint32_t;
  switch (k.gen) {
    case 0: { auto r = reprosgd::philox2x32<R>({{U(k.ctr[0]), U(k.ctr[1])}}, {{U(k.key[0])}});
              for (int i = 0; i < 2; ++i) out[i] = r[i]; } break;
    case 1: { auto r = reprosgd::philox4x32<R>({{U(k.ctr[0]), U(k.ctr[1]), U(k.ctr[2]), U(k.ctr[3])}},
                                               {{U(k.key[0]), U(k.key[1])}});
              for (int i = 0; i < 4; ++i) out[i] = r[i]; } break;
    case 2: { auto r = reprosgd::philox2x64<R>({{k.ctr[0], k.ctr[1]}}, {{k.key[0]}});
              for (int i = 0; i < 2; ++i) out[i] = r[i]; } break;
    case 3: { auto r = reprosgd::philox4x64<R>({{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}}, {{k.key[0], k.key[1]}});
              for (int i = 0; i < 4; ++i) out[i] = r[i]; } break;
  }
}
__host__ __device__ void kat_compute(const Kat& k, std::uint64_t* out) {
  for (int i = 0; i < 4; ++i) out[i] = 0;
  if (k.rounds == 7) kat_rounds<7>(k, out);
  else kat_rounds<10>(k, out);
}
__global__ void kat_kernel(const Kat* in, std::uint64_t* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) kat_compute(in[i], out + 4 * i);
}

// ---- 2. elementwise math over a spread of all float bit patterns ----------------------------
// Input i is the bit pattern (i << 8) | (i * 0x9E & 0xFF): every exponent and sign, both zeros,
// subnormals, infinities, NaNs, with varied low bits.
__host__ __device__ inline float math_input(std::uint32_t i) {
  return bits_float((i << 8) | ((i * 0x9Eu) & 0xFFu));
}
__host__ __device__ inline float math_apply(int f, float x) {
  switch (f) {
    case 0: return reprosgd::math::exp(x);
    case 1: return reprosgd::math::log(x);
    case 2: return reprosgd::math::tanh(x);
    case 3: return reprosgd::math::sigmoid(x);
    default: return reprosgd::math::cospi(x);
  }
}
__global__ void math_kernel(int f, std::uint32_t* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = float_bits(math_apply(f, math_input(std::uint32_t(i))));
}

// ---- 3. PhiloxStream and the conversions ---------------------------------------------------
__host__ __device__ inline reprosgd::StreamCoordinates stream_coords(std::size_t i) {
  // Spread over every field, including the top of each range.
  const auto p = static_cast<reprosgd::Purpose>(i % 5);
  return {p, std::uint32_t((i * 2654435761u) & ((1u << 30) - 1)), std::uint64_t((i >> 3) ^ 0xFFFF0000u),
          std::uint64_t(0xFFFFFFFFu - (i >> 1)), std::uint64_t(i * 7u) & 0xFFFFFFFFu};
}
struct StreamOut {
  std::uint32_t word, uniform, open0, normal, keep;
};
__host__ __device__ inline StreamOut stream_apply(const reprosgd::PhiloxStream& rng, std::size_t i, std::uint32_t t) {
  const auto c = stream_coords(i);
  const auto w = rng.generate(c);
  return {rng.uint32(c), float_bits(reprosgd::uniform_float(w[0])), float_bits(reprosgd::uniform_float_open0(w[1])),
          float_bits(reprosgd::normal_float(w[2], w[3])), reprosgd::dropout_keep(w[3], t) ? 1u : 0u};
}
__global__ void stream_kernel(reprosgd::PhiloxStream rng, std::uint32_t t, StreamOut* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = stream_apply(rng, i, t);
}
__global__ void substream_kernel(reprosgd::PhiloxStream rng, std::uint64_t* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = rng.substream(i * 0x9E3779B97F4A7C15ull).seed();
}

// ---- 4. KeyedPermutation -------------------------------------------------------------------
__global__ void perm_kernel(reprosgd::KeyedPermutation p, std::uint64_t stride, std::uint64_t* out, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    out[i] = p((i * stride) % p.size());
}

// ---- 5. the floating-point environment: is a*b+c contracted into an FMA? -------------------
__host__ __device__ inline float contraction_probe(float a, float b, float c) { return a * b + c; }
__global__ void probe_kernel(const float* in, float* out) { out[0] = contraction_probe(in[0], in[1], in[2]); }

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  CUDA_CHECK(cudaGetDeviceCount(&devices));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("L5 check on %s (sm_%d%d) against the host\n", prop.name, prop.major, prop.minor);
  constexpr int block = 256, grid = 4096;

  {  // 5 first: a contracted build makes every float comparison below meaningless.
    // 1 + 2^-12 squared minus its rounded square: 2^-24 exactly with an FMA, 0 without.
    const float a = 1.0f + 0x1p-12f, c = -(1.0f + 0x1p-11f);
    const std::vector<float> in{a, a, c};
    DeviceArray<float> d_in(3), d_out(1);
    d_in.from_host(in);
    probe_kernel<<<1, 1>>>(d_in.ptr, d_out.ptr);
    CUDA_CHECK(cudaGetLastError());
    volatile float va = a, vb = a, vc = c;
    const std::vector<std::uint32_t> dev{float_bits(d_out.to_host()[0])}, host{float_bits(contraction_probe(va, vb, vc))};
    std::printf("FMA contraction probe (device %g, host %g; 0 = not contracted)\n", bits_float(dev[0]), bits_float(host[0]));
    report("a*b+c not contracted", dev, std::vector<std::uint32_t>{float_bits(0.0f)});
    report("a*b+c device == host", dev, host);
  }

  {  // 1. Philox KAT
    std::string text = embedded_kat;
    if (argc > 1) {
      std::ifstream f(argv[1]);
      if (!f) {
        std::fprintf(stderr, "l5_check: cannot open %s\n", argv[1]);
        return 2;
      }
      std::stringstream ss;
      ss << f.rdbuf();
      text = ss.str();
    }
    int lines = 0;
    const auto kats = parse_kat(text, lines);
    const int n = static_cast<int>(kats.size());
    std::printf("Philox KAT: %d vectors parsed of %d lines\n", n, lines);
    if (n != lines || n != 24) {
      std::printf("  expected 24 parseable vectors\n");
      total_mismatches += 1;
    }
    DeviceArray<Kat> d_in(n);
    DeviceArray<std::uint64_t> d_out(4 * std::size_t(n));
    d_in.from_host(kats);
    kat_kernel<<<(n + 63) / 64, 64>>>(d_in.ptr, d_out.ptr, n);
    CUDA_CHECK(cudaGetLastError());
    const auto dev = d_out.to_host();
    std::vector<std::uint64_t> host(4 * std::size_t(n)), expected(4 * std::size_t(n));
    for (int i = 0; i < n; ++i) {
      kat_compute(kats[i], &host[4 * i]);
      for (int w = 0; w < 4; ++w) expected[4 * i + w] = w < kats[i].n ? kats[i].expected[w] : 0;
    }
    report("philox KAT: device == published", dev, expected);
    report("philox KAT: host == published", host, expected);
  }

  {  // 2. math
    const std::size_t n = std::size_t(1) << 24;
    const char* names[] = {"math::exp", "math::log", "math::tanh", "math::sigmoid", "math::cospi"};
    DeviceArray<std::uint32_t> d_out(n);
    std::vector<std::uint32_t> host(n);
    for (int f = 0; f < 5; ++f) {
      math_kernel<<<grid, block>>>(f, d_out.ptr, n);
      CUDA_CHECK(cudaGetLastError());
      for (std::size_t i = 0; i < n; ++i) host[i] = float_bits(math_apply(f, math_input(std::uint32_t(i))));
      report(names[f], d_out.to_host(), host);
    }
  }

  {  // 3. stream and conversions
    const std::size_t n = std::size_t(1) << 24;
    const reprosgd::PhiloxStream rng(0x5EED5EED12345678ull);
    const std::uint32_t t = reprosgd::dropout_threshold(0.3f);
    DeviceArray<StreamOut> d_out(n);
    stream_kernel<<<grid, block>>>(rng, t, d_out.ptr, n);
    CUDA_CHECK(cudaGetLastError());
    const auto dev = d_out.to_host();
    std::vector<StreamOut> host(n);
    for (std::size_t i = 0; i < n; ++i) host[i] = stream_apply(rng, i, t);
    std::vector<std::uint32_t> dv(n), hv(n);
    const char* names[] = {"PhiloxStream::uint32", "uniform_float", "uniform_float_open0", "normal_float", "dropout_keep"};
    for (int k = 0; k < 5; ++k) {
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t* d = &dev[i].word;
        const std::uint32_t* h = &host[i].word;
        dv[i] = d[k];
        hv[i] = h[k];
      }
      report(names[k], dv, hv);
    }
    const std::size_t ns = std::size_t(1) << 20;
    DeviceArray<std::uint64_t> d_sub(ns);
    substream_kernel<<<grid, block>>>(rng, d_sub.ptr, ns);
    CUDA_CHECK(cudaGetLastError());
    std::vector<std::uint64_t> hs(ns);
    for (std::size_t i = 0; i < ns; ++i) hs[i] = rng.substream(i * 0x9E3779B97F4A7C15ull).seed();
    report("PhiloxStream::substream", d_sub.to_host(), hs);
  }

  {  // 4. permutations: a full epoch of 60000, and 2^20 positions of the largest size
    struct Case { std::uint64_t seed, epoch, n, stride; std::size_t count; const char* name; };
    const Case cases[] = {{42, 0, 60000, 1, 60000, "KeyedPermutation n=60000"},
                          {7, 123456789, (std::uint64_t(1) << 40) - 1, 1048573, std::size_t(1) << 20,
                           "KeyedPermutation n=2^40-1"}};
    for (const auto& c : cases) {
      const reprosgd::KeyedPermutation p(c.seed, c.epoch, c.n);
      DeviceArray<std::uint64_t> d_out(c.count);
      perm_kernel<<<grid, block>>>(p, c.stride, d_out.ptr, c.count);
      CUDA_CHECK(cudaGetLastError());
      std::vector<std::uint64_t> host(c.count);
      for (std::size_t i = 0; i < c.count; ++i) host[i] = p((i * c.stride) % p.size());
      report(c.name, d_out.to_host(), host);
    }
    const reprosgd::KeyedPermutation golden(42, 0, 60000);
    if (golden(0) != 20845 || golden(1) != 9474 || golden(2) != 58765) {
      std::printf("  KeyedPermutation golden prefix differs from the unit test's\n");
      total_mismatches += 1;
    }
  }

  CUDA_CHECK(cudaDeviceSynchronize());
  std::printf("L5 check: %ld mismatches\n", total_mismatches);
  return total_mismatches == 0 ? 0 : 1;
}
