#pragma once
// An owning, aligned array for large read-mostly data (weights, KV pages). Buffers of 2 MiB and
// more are 2 MiB-aligned and advised to use transparent huge pages: streaming 100+ MB of weights
// through 4 KiB pages costs a TLB miss, and a hardware-prefetch restart, every 4 KiB.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

namespace tandem::engine {

namespace internal {
// Zero-initialized storage of `bytes` (64-byte aligned, or 2 MiB aligned + MADV_HUGEPAGE when
// large). Returns nullptr on allocation failure or for 0 bytes.
void* AllocateAligned(size_t bytes);
void FreeAligned(void* p);
}  // namespace internal

template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // REQUIRES: allocation succeeds (callers size buffers from validated shapes).
  explicit AlignedBuffer(size_t count)
      : data_(static_cast<T*>(internal::AllocateAligned(count * sizeof(T)))), size_(count) {}
  AlignedBuffer(const T* first, size_t count) : AlignedBuffer(count) {
    if (count > 0) std::memcpy(data_, first, count * sizeof(T));
  }
  ~AlignedBuffer() { internal::FreeAligned(data_); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      internal::FreeAligned(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tandem::engine
