#include "common/lsm/internal_key.h"

#include "common/coding.h"

namespace nova::lsm {

void AppendInternalKey(std::string* dst, const leveldb::Slice& user_key, SequenceNumber seq,
                       ValueType type) {
  dst->append(user_key.data(), user_key.size());
  PutFixed64(dst, PackSequenceAndType(seq, type));
}

std::string MakeInternalKey(const leveldb::Slice& user_key, SequenceNumber seq, ValueType type) {
  std::string k;
  AppendInternalKey(&k, user_key, seq, type);
  return k;
}

bool ParseInternalKey(const leveldb::Slice& ikey, ParsedInternalKey* out) {
  if (ikey.size() < kInternalKeyTrailerBytes) return false;
  const uint64_t packed = DecodeFixed64(ikey.data() + ikey.size() - kInternalKeyTrailerBytes);
  const uint8_t type = static_cast<uint8_t>(packed & 0xff);
  if (type > kTypeValue) return false;
  out->user_key = ExtractUserKey(ikey);
  out->sequence = packed >> 8;
  out->type = static_cast<ValueType>(type);
  return true;
}

int InternalKeyComparator::Compare(const leveldb::Slice& a, const leveldb::Slice& b) const {
  const bool a_ok = a.size() >= kInternalKeyTrailerBytes;
  const bool b_ok = b.size() >= kInternalKeyTrailerBytes;
  if (!a_ok || !b_ok) {
    if (a_ok != b_ok) return a_ok ? 1 : -1;
    return a.compare(b);
  }
  int r = user_->Compare(ExtractUserKey(a), ExtractUserKey(b));
  if (r != 0) return r;
  const uint64_t an = DecodeFixed64(a.data() + a.size() - kInternalKeyTrailerBytes);
  const uint64_t bn = DecodeFixed64(b.data() + b.size() - kInternalKeyTrailerBytes);
  if (an > bn) return -1;  // newer first
  if (an < bn) return 1;
  return 0;
}

void InternalKeyComparator::FindShortestSeparator(std::string* start,
                                                  const leveldb::Slice& limit) const {
  if (start->size() < kInternalKeyTrailerBytes || limit.size() < kInternalKeyTrailerBytes) return;
  leveldb::Slice user_start = ExtractUserKey(*start);
  leveldb::Slice user_limit = ExtractUserKey(limit);
  std::string tmp(user_start.data(), user_start.size());
  user_->FindShortestSeparator(&tmp, user_limit);
  if (tmp.size() < user_start.size() && user_->Compare(user_start, tmp) < 0) {
    // A shorter user key that is physically larger: give it the earliest possible trailer
    // so it still sorts before every entry of user_limit.
    PutFixed64(&tmp, PackSequenceAndType(kMaxSequenceNumber, kTypeForSeek));
    start->swap(tmp);
  }
}

void InternalKeyComparator::FindShortSuccessor(std::string* key) const {
  if (key->size() < kInternalKeyTrailerBytes) return;
  leveldb::Slice user_key = ExtractUserKey(*key);
  std::string tmp(user_key.data(), user_key.size());
  user_->FindShortSuccessor(&tmp);
  if (tmp.size() < user_key.size() && user_->Compare(user_key, tmp) < 0) {
    PutFixed64(&tmp, PackSequenceAndType(kMaxSequenceNumber, kTypeForSeek));
    key->swap(tmp);
  }
}

}  // namespace nova::lsm
