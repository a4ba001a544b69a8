#include "common/lsm/table_meta.h"

#include <algorithm>

#include "common/coding.h"

namespace nova::lsm {

namespace {

// Bounds on counts read from disk, so a damaged record cannot make us allocate much.
constexpr uint32_t kMaxReplicas = 64;
// Set in a replica count when the replicas' locations carry chunk_bytes and chunk_stride.
// Only then: a table without chunked fragments encodes as before this field existed, and an
// older reader rejects (count > kMaxReplicas) rather than misreads one with them.
constexpr uint32_t kChunkedFlag = 1u << 7;
// Set in the filter's replica count when parity follows the filter: a flags byte (bit 0:
// parity_covers_meta) and the parity fragments' locations as a replica list. Only then, so
// a table without parity encodes as before, and an older reader rejects one with it.
constexpr uint32_t kParityFlag = 1u << 8;
constexpr uint8_t kParityCoversMeta = 1;
// Parity fragments a table may have (m).
constexpr uint32_t kMaxParity = 16;

void PutLocation(std::string* dst, const FragmentLocation& l, bool chunked) {
  PutVarint32(dst, l.stoc_id);
  PutVarint64(dst, l.file_id);
  PutVarint64(dst, l.offset);
  PutVarint64(dst, l.size);
  if (chunked) {
    PutVarint64(dst, l.chunk_bytes);
    PutVarint64(dst, l.chunk_stride);
  }
}

bool GetLocation(std::string_view* in, FragmentLocation* l, bool chunked) {
  if (!GetVarint32(in, &l->stoc_id) || !GetVarint64(in, &l->file_id) ||
      !GetVarint64(in, &l->offset) || !GetVarint64(in, &l->size)) {
    return false;
  }
  if (!chunked) return true;
  if (!GetVarint64(in, &l->chunk_bytes) || !GetVarint64(in, &l->chunk_stride)) return false;
  // A chunked location has chunks at least as far apart as they are long.
  return l->chunk_bytes == 0 ? l->chunk_stride == 0 : l->chunk_stride >= l->chunk_bytes;
}

void PutReplicas(std::string* dst, const std::vector<FragmentLocation>& r, uint32_t flags = 0) {
  const bool chunked =
      std::any_of(r.begin(), r.end(), [](const FragmentLocation& l) { return l.chunk_bytes != 0; });
  PutVarint32(dst, static_cast<uint32_t>(r.size()) | (chunked ? kChunkedFlag : 0) | flags);
  for (const auto& l : r) PutLocation(dst, l, chunked);
}

// `allowed_flags`: flag bits besides kChunkedFlag the count may carry; those present are
// returned in *flags.
bool GetReplicas(std::string_view* in, std::vector<FragmentLocation>* r,
                 uint32_t allowed_flags = 0, uint32_t* flags = nullptr) {
  uint32_t n;
  if (!GetVarint32(in, &n)) return false;
  const bool chunked = (n & kChunkedFlag) != 0;
  n &= ~kChunkedFlag;
  if (flags != nullptr) *flags = n & allowed_flags;
  n &= ~allowed_flags;
  if (n > kMaxReplicas) return false;
  r->resize(n);
  for (auto& l : *r) {
    if (!GetLocation(in, &l, chunked)) return false;
  }
  return true;
}

}  // namespace

void EncodeTableMeta(std::string* dst, const TableMeta& t) {
  PutVarint64(dst, t.number);
  PutLengthPrefixed(dst, t.smallest);
  PutLengthPrefixed(dst, t.largest);
  PutVarint64(dst, t.num_entries);
  PutVarint64(dst, t.smallest_sequence);
  PutVarint64(dst, t.largest_sequence);
  PutVarint32(dst, t.drange);
  t.layout.EncodeTo(dst);
  for (const auto& replicas : t.fragments) PutReplicas(dst, replicas);
  if (t.parity.empty()) {
    PutReplicas(dst, t.filter);
    return;
  }
  PutReplicas(dst, t.filter, kParityFlag);
  dst->push_back(static_cast<char>(t.parity_covers_meta ? kParityCoversMeta : 0));
  PutReplicas(dst, t.parity);
}

bool DecodeTableMeta(std::string_view* in, TableMeta* t) {
  std::string_view smallest, largest;
  if (!GetVarint64(in, &t->number) || !GetLengthPrefixed(in, &smallest) ||
      !GetLengthPrefixed(in, &largest) || !GetVarint64(in, &t->num_entries) ||
      !GetVarint64(in, &t->smallest_sequence) || !GetVarint64(in, &t->largest_sequence) ||
      !GetVarint32(in, &t->drange) || !TableLayout::DecodeFrom(in, &t->layout).ok()) {
    return false;
  }
  t->smallest = smallest;
  t->largest = largest;
  t->fragments.resize(t->layout.num_fragments());
  for (auto& replicas : t->fragments) {
    if (!GetReplicas(in, &replicas)) return false;
  }
  uint32_t flags = 0;
  if (!GetReplicas(in, &t->filter, kParityFlag, &flags)) return false;
  t->parity.clear();
  t->parity_covers_meta = false;
  if ((flags & kParityFlag) == 0) return true;
  if (in->empty()) return false;
  const uint8_t parity_flags = static_cast<uint8_t>((*in)[0]);
  in->remove_prefix(1);
  if ((parity_flags & ~kParityCoversMeta) != 0) return false;
  t->parity_covers_meta = (parity_flags & kParityCoversMeta) != 0;
  return GetReplicas(in, &t->parity) && !t->parity.empty() && t->parity.size() <= kMaxParity;
}

size_t CopiesOn(const TableMeta& t, const std::function<bool(uint32_t stoc_id)>& on) {
  size_t n = 0;
  for (const auto& replicas : t.fragments) {
    for (const FragmentLocation& l : replicas) n += l.size > 0 && on(l.stoc_id) ? 1 : 0;
  }
  for (const FragmentLocation& l : t.filter) n += l.size > 0 && on(l.stoc_id) ? 1 : 0;
  for (const FragmentLocation& l : t.parity) n += l.size > 0 && on(l.stoc_id) ? 1 : 0;
  return n;
}

}  // namespace nova::lsm
