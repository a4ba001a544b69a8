// SlabAllocator: buffers for one-sided operations, carved from ONE pre-registered pool.
//
// Registering memory with an RDMA NIC is slow and pins pages, so a process registers one
// pool up front (DESIGN.md section 3) and hands out pieces of it:
//  - requests are rounded up to a power-of-two size class in [min_class_bytes,
//    max_class_bytes];
//  - the pool is carved on demand into slabs of max(slab_bytes, class) bytes; a slab
//    belongs to one class for the life of the allocator and is cut into equal buffers;
//  - freed buffers go to their class's free list and are reused (last freed, first reused).
// The pool never grows: when a class has no free buffer and the pool has no room for one
// more slab, Allocate returns ResourceExhausted. Memory in one class's slabs is never
// moved to another class, so a workload that shifts between sizes can exhaust the pool
// while other classes have free buffers; GetStats() shows it. Size the pool for the mix.
//
// Lifecycle (STYLE.md): the constructor cannot fail; Init() maps and registers the pool;
// Shutdown() (also run by the destructor) deregisters and unmaps it.
//
// Thread safety: all public methods are thread-safe; one internal mutex serializes them.
// Lock order: Init and Shutdown hold it while calling Transport::RegisterMemory and
// DeregisterMemory, so the transport must never call into the allocator.
#pragma once

#include <cstdint>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/transport/transport.h"

namespace nova::transport {

struct SlabOptions {
  // Size of the single registered pool. REQUIRES: a multiple of slab_bytes and at least
  // max_class_bytes.
  uint64_t pool_bytes = 64ull << 20;
  // Smallest size class. REQUIRES: a power of two.
  uint64_t min_class_bytes = 256;
  // Largest size class: bigger requests are refused. REQUIRES: a power of two >= min.
  uint64_t max_class_bytes = 16ull << 20;
  // How much of the pool a class takes at a time (classes larger than this take one
  // buffer's worth). REQUIRES: a power of two >= min_class_bytes.
  uint64_t slab_bytes = 1ull << 20;
};

// A piece of the pool. Plain value: copying it does not copy or own the memory; it is
// owned by the allocator until passed to Free. Valid until Free or allocator destruction.
struct Buffer {
  char* data = nullptr;
  uint64_t size = 0;      // bytes requested
  uint64_t capacity = 0;  // bytes usable: the size class, >= size
  // The pool's region (owned by the allocator); use with Transport::Write/Read together
  // with `offset`.
  const MemoryRegion* region = nullptr;
  uint64_t offset = 0;      // of data within region
  uint32_t size_class = 0;  // index: capacity == min_class_bytes << size_class

  // Where peers reach this buffer.
  RemoteAddr remote() const { return region->Remote(offset); }
};

struct SlabClassStats {
  uint64_t class_bytes = 0;
  uint64_t allocated = 0;  // buffers handed out and not yet freed
  uint64_t free = 0;       // buffers on the free list
  uint64_t slabs = 0;      // slabs carved for this class
};

struct SlabStats {
  std::vector<SlabClassStats> classes;  // index = size class
  uint64_t pool_bytes_total = 0;
  uint64_t pool_bytes_used = 0;     // carved into slabs
  uint64_t bytes_allocated = 0;     // sum of capacities handed out
  uint64_t failed_allocations = 0;  // refused: exhausted, too large, not running
};

class SlabAllocator {
 public:
  // `transport` registers the pool; it must outlive the allocator. nullptr leaves the pool
  // unregistered (unit tests): region() then has id and rkey 0 and access kLocalOnly.
  SlabAllocator(Transport* transport, SlabOptions options);
  // Calls Shutdown().
  ~SlabAllocator();

  SlabAllocator(const SlabAllocator&) = delete;
  SlabAllocator& operator=(const SlabAllocator&) = delete;

  // Validates the options, maps the pool and registers it (kRemoteRead | kRemoteWrite).
  // Returns InvalidArgument for bad options, ResourceExhausted if the pool cannot be
  // mapped, or the transport's error (the pool is then unmapped). REQUIRES: called once.
  Status Init();

  // Deregisters and unmaps the pool; later Allocate calls fail with Unavailable.
  // Idempotent. REQUIRES: no buffer is in use by a posted operation (its memory goes away).
  // Free of buffers allocated earlier stays allowed (it only updates bookkeeping).
  void Shutdown();

  // Returns a buffer of at least `bytes` bytes (rounded up to its size class; 0 gets the
  // smallest class). Errors: InvalidArgument if bytes > max_class_bytes,
  // ResourceExhausted("slab pool exhausted: ...") if no buffer of that class is free and
  // the pool has no room for another slab, IllegalState before Init, Unavailable after
  // Shutdown. The contents of a new buffer are unspecified.
  Result<Buffer> Allocate(uint64_t bytes);

  // Returns `buffer` to its class's free list. REQUIRES: `buffer` came from this
  // allocator's Allocate and was not freed since (checked: misuse aborts the process).
  void Free(const Buffer& buffer);

  SlabStats GetStats() const;

  // The registered pool. REQUIRES: Init() succeeded and Shutdown() was not called.
  const MemoryRegion& region() const { return region_; }
  const SlabOptions& options() const { return options_; }

 private:
  Status ValidateOptions() const;
  // Carves one more slab for `size_class` onto its free list.
  bool CarveSlab(uint32_t size_class) REQUIRES(mu_);
  uint64_t ClassBytes(uint32_t size_class) const { return options_.min_class_bytes << size_class; }
  uint64_t SlabBytesFor(uint32_t size_class) const;

  // Constant after construction.
  Transport* const transport_;  // may be nullptr; must outlive this
  const SlabOptions options_;

  mutable Mutex mu_;
  // region_ is written only by Init; callers read it through Buffer::region after an
  // Allocate (which takes mu_) has returned it.
  enum class State { kNew, kRunning, kShutDown };
  State state_ GUARDED_BY(mu_) = State::kNew;
  bool registered_ GUARDED_BY(mu_) = false;
  MemoryRegion region_ GUARDED_BY(mu_);
  // The pool's prefix [0, carved_bytes_) is cut into slabs.
  uint64_t carved_bytes_ GUARDED_BY(mu_) = 0;
  // Per class: offsets of free buffers.
  std::vector<std::vector<uint64_t>> free_offsets_ GUARDED_BY(mu_);
  std::vector<SlabClassStats> class_stats_ GUARDED_BY(mu_);
  // Per slab_bytes unit of the pool: the class of the slab covering it, or kUncarved.
  std::vector<int8_t> unit_class_ GUARDED_BY(mu_);
  // Per min_class_bytes unit of the pool: set while a buffer starting there is allocated.
  // Catches double and foreign frees.
  std::vector<bool> allocated_ GUARDED_BY(mu_);
  uint64_t bytes_allocated_ GUARDED_BY(mu_) = 0;
  uint64_t failed_allocations_ GUARDED_BY(mu_) = 0;
};

}  // namespace nova::transport
