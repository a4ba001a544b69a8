#include "common/transport/slab_allocator.h"

#include <glog/logging.h>
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <string>

namespace nova::transport {

namespace {

constexpr int8_t kUncarved = -1;
// unit_class_ stores a class index in an int8_t; 64 classes cover any uint64_t range.
constexpr uint64_t kMaxClasses = 64;

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

std::string Bytes(uint64_t v) { return std::to_string(v) + " B"; }

}  // namespace

SlabAllocator::SlabAllocator(Transport* transport, SlabOptions options)
    : transport_(transport), options_(options) {}

SlabAllocator::~SlabAllocator() { Shutdown(); }

Status SlabAllocator::ValidateOptions() const {
  const SlabOptions& o = options_;
  if (!IsPowerOfTwo(o.min_class_bytes)) {
    return Status::InvalidArgument("slab min_class_bytes must be a power of two, got " +
                                   std::to_string(o.min_class_bytes));
  }
  if (!IsPowerOfTwo(o.max_class_bytes) || o.max_class_bytes < o.min_class_bytes) {
    return Status::InvalidArgument(
        "slab max_class_bytes must be a power of two >= " + std::to_string(o.min_class_bytes) +
        ", got " + std::to_string(o.max_class_bytes));
  }
  if (!IsPowerOfTwo(o.slab_bytes) || o.slab_bytes < o.min_class_bytes) {
    return Status::InvalidArgument(
        "slab slab_bytes must be a power of two >= min_class_bytes, got " +
        std::to_string(o.slab_bytes));
  }
  if (o.pool_bytes == 0 || o.pool_bytes % o.slab_bytes != 0 || o.pool_bytes < o.max_class_bytes) {
    return Status::InvalidArgument(
        "slab pool_bytes must be a non-zero multiple of slab_bytes (" +
        std::to_string(o.slab_bytes) + ") and at least max_class_bytes (" +
        std::to_string(o.max_class_bytes) + "), got " + std::to_string(o.pool_bytes));
  }
  return Status::OK();
}

Status SlabAllocator::Init() {
  MutexLock l(&mu_);
  if (state_ != State::kNew) return Status::IllegalState("SlabAllocator::Init called twice");
  NOVA_RETURN_NOT_OK(ValidateOptions());

  // An anonymous mapping is page-aligned and only takes physical memory once touched
  // (registration with a NIC pins it).
  void* base = mmap(nullptr, options_.pool_bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    return Status::ResourceExhausted("cannot map a slab pool of " + Bytes(options_.pool_bytes) +
                                     ": " + Status::FromErrno("mmap", err).message());
  }
  if (transport_ != nullptr) {
    Result<MemoryRegion> r =
        transport_->RegisterMemory(base, options_.pool_bytes, kRemoteRead | kRemoteWrite);
    if (!r.ok()) {
      munmap(base, options_.pool_bytes);
      return r.status().Prepend("registering the slab pool");
    }
    region_ = *r;
    registered_ = true;
  } else {
    region_ = MemoryRegion{};
    region_.base = static_cast<char*>(base);
    region_.length = options_.pool_bytes;
    region_.access = kLocalOnly;
  }

  const uint64_t classes =
      std::countr_zero(options_.max_class_bytes) - std::countr_zero(options_.min_class_bytes) + 1;
  static_assert(kMaxClasses <= 1 + INT8_MAX, "unit_class_ holds a class index");
  free_offsets_.assign(classes, {});
  class_stats_.assign(classes, SlabClassStats{});
  for (uint32_t c = 0; c < classes; ++c) class_stats_[c].class_bytes = ClassBytes(c);
  unit_class_.assign(options_.pool_bytes / options_.slab_bytes, kUncarved);
  allocated_.assign(options_.pool_bytes / options_.min_class_bytes, false);
  state_ = State::kRunning;
  return Status::OK();
}

void SlabAllocator::Shutdown() {
  MutexLock l(&mu_);
  if (state_ != State::kRunning) {
    state_ = State::kShutDown;
    return;
  }
  state_ = State::kShutDown;
  uint64_t outstanding = 0;
  for (const SlabClassStats& s : class_stats_) outstanding += s.allocated;
  if (outstanding > 0) {
    LOG(WARNING) << "slab allocator shutting down with " << outstanding
                 << " buffers still allocated; their memory is released now";
  }
  if (registered_) {
    Status s = transport_->DeregisterMemory(region_);
    if (!s.ok()) {
      // The transport may still apply peers' writes to the pool: leaking it is safer than
      // letting them land in unmapped (or reused) memory.
      LOG(ERROR) << "cannot deregister the slab pool, leaking " << options_.pool_bytes
                 << " bytes: " << s.ToString();
      return;
    }
    registered_ = false;
  }
  munmap(region_.base, options_.pool_bytes);
}

uint64_t SlabAllocator::SlabBytesFor(uint32_t size_class) const {
  return std::max(options_.slab_bytes, ClassBytes(size_class));
}

bool SlabAllocator::CarveSlab(uint32_t size_class) {
  const uint64_t slab = SlabBytesFor(size_class);
  if (options_.pool_bytes - carved_bytes_ < slab) return false;
  const uint64_t start = carved_bytes_;
  carved_bytes_ += slab;
  // Every slab size is a multiple of slab_bytes, so slabs start on unit boundaries.
  for (uint64_t u = start / options_.slab_bytes; u < carved_bytes_ / options_.slab_bytes; ++u) {
    unit_class_[u] = static_cast<int8_t>(size_class);
  }
  // Pushed highest first so the lowest address is handed out first.
  const uint64_t class_bytes = ClassBytes(size_class);
  std::vector<uint64_t>& list = free_offsets_[size_class];
  for (uint64_t off = carved_bytes_; off > start;) {
    off -= class_bytes;
    list.push_back(off);
  }
  SlabClassStats& stats = class_stats_[size_class];
  stats.slabs++;
  stats.free += slab / class_bytes;
  return true;
}

Result<Buffer> SlabAllocator::Allocate(uint64_t bytes) {
  MutexLock l(&mu_);
  if (state_ != State::kRunning) {
    failed_allocations_++;
    if (state_ == State::kNew) return Status::IllegalState("slab allocator not initialized");
    return Status::Unavailable("slab allocator is shut down");
  }
  if (bytes > options_.max_class_bytes) {
    failed_allocations_++;
    return Status::InvalidArgument("slab allocation of " + Bytes(bytes) +
                                   " exceeds the largest size class, " +
                                   Bytes(options_.max_class_bytes));
  }
  const uint64_t class_bytes = std::bit_ceil(std::max(bytes, options_.min_class_bytes));
  const auto size_class = static_cast<uint32_t>(std::countr_zero(class_bytes) -
                                                std::countr_zero(options_.min_class_bytes));
  std::vector<uint64_t>& list = free_offsets_[size_class];
  if (list.empty() && !CarveSlab(size_class)) {
    failed_allocations_++;
    return Status::ResourceExhausted(
        "slab pool exhausted: no free " + Bytes(class_bytes) + " buffer (" +
        std::to_string(class_stats_[size_class].allocated) + " in use) and only " +
        Bytes(options_.pool_bytes - carved_bytes_) + " of the " + Bytes(options_.pool_bytes) +
        " pool left uncarved, a slab needs " + Bytes(SlabBytesFor(size_class)));
  }
  const uint64_t offset = list.back();
  list.pop_back();
  allocated_[offset / options_.min_class_bytes] = true;
  SlabClassStats& stats = class_stats_[size_class];
  stats.free--;
  stats.allocated++;
  bytes_allocated_ += class_bytes;

  Buffer b;
  b.data = region_.base + offset;
  b.size = bytes;
  b.capacity = class_bytes;
  b.region = &region_;
  b.offset = offset;
  b.size_class = size_class;
  return b;
}

void SlabAllocator::Free(const Buffer& b) {
  MutexLock l(&mu_);
  // Misuse here is a programming error that would hand one buffer to two owners: stop.
  CHECK(state_ != State::kNew) << "SlabAllocator::Free before Init";
  CHECK(b.region == &region_) << "SlabAllocator::Free of a buffer from another allocator";
  CHECK(b.size_class < class_stats_.size())
      << "SlabAllocator::Free: bad size class " << b.size_class;
  const uint64_t class_bytes = ClassBytes(b.size_class);
  CHECK(b.offset < options_.pool_bytes && b.capacity == class_bytes &&
        b.offset % std::min(class_bytes, options_.slab_bytes) == 0 &&
        unit_class_[b.offset / options_.slab_bytes] == static_cast<int8_t>(b.size_class) &&
        b.data == region_.base + b.offset)
      << "SlabAllocator::Free of a corrupted buffer: offset " << b.offset << " capacity "
      << b.capacity << " class " << b.size_class;
  const uint64_t unit = b.offset / options_.min_class_bytes;
  CHECK(allocated_[unit]) << "SlabAllocator::Free: double free of offset " << b.offset;
  allocated_[unit] = false;
  free_offsets_[b.size_class].push_back(b.offset);
  SlabClassStats& stats = class_stats_[b.size_class];
  stats.allocated--;
  stats.free++;
  bytes_allocated_ -= class_bytes;
}

SlabStats SlabAllocator::GetStats() const {
  MutexLock l(&mu_);
  SlabStats s;
  s.classes = class_stats_;
  s.pool_bytes_total = options_.pool_bytes;
  s.pool_bytes_used = carved_bytes_;
  s.bytes_allocated = bytes_allocated_;
  s.failed_allocations = failed_allocations_;
  return s;
}

}  // namespace nova::transport
