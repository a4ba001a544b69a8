#include "common/lsm/compaction_merge.h"

#include "common/lsm/leveldb_glue.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace nova::lsm {
namespace {



Status CheckOptions(const CompactionMergeOptions& o) {
  if (o.icmp == nullptr) return Status::InvalidArgument("icmp is null");
  if (!std::is_sorted(o.snapshots.begin(), o.snapshots.end())) {
    return Status::InvalidArgument("snapshots are not in ascending order");
  }
  const SequenceNumber smallest = o.snapshots.empty() ? kMaxSequenceNumber : o.snapshots.front();
  if (o.smallest_snapshot_or_max != smallest) {
    return Status::InvalidArgument("smallest_snapshot_or_max " +
                                   std::to_string(o.smallest_snapshot_or_max) +
                                   " disagrees with snapshots (" + std::to_string(smallest) + ")");
  }
  if (o.max_output_bytes == 0) return Status::InvalidArgument("max_output_bytes is 0");
  const leveldb::Comparator* ucmp = o.icmp->user_comparator();
  for (size_t i = 1; i < o.split_user_keys.size(); ++i) {
    if (ucmp->Compare(o.split_user_keys[i - 1], o.split_user_keys[i]) >= 0) {
      return Status::InvalidArgument("split_user_keys are not strictly ascending at '" +
                                     EscapeKeyForMessage(o.split_user_keys[i]) + "'");
    }
  }
  return Status::OK();
}

// One run of the merge. Input is read in internal key order: for each user key, its
// versions newest first. Per user key it tracks the stripe of the last kept version, and
// (bottommost only) a kept deletion whose fate depends on the next kept version.
class CompactionMerger {
 public:
  CompactionMerger(const CompactionMergeOptions& options, CompactionOutputSink* sink,
                   CompactionStats* stats)
      : options_(options), ucmp_(options.icmp->user_comparator()), sink_(sink), stats_(stats) {}

  Status Run(leveldb::Iterator* input) {
    for (input->SeekToFirst(); input->Valid(); input->Next()) {
      ++stats_->input_entries;
      NOVA_RETURN_NOT_OK(Consume(input->key(), input->value()));
    }
    NOVA_RETURN_NOT_OK_PREPEND(FromLevelDbStatus(input->status()), "compaction input");
    EndUserKey();
    if (output_open_) NOVA_RETURN_NOT_OK_PREPEND(sink_->FinishOutput(), "finishing output");
    output_open_ = false;
    return Status::OK();
  }

 private:
  static constexpr size_t kNoStripe = SIZE_MAX;

  // Stripe of a sequence number: the index of the first snapshot >= seq, or
  // snapshots.size() ("latest") if there is none.
  size_t StripeOf(SequenceNumber seq) const {
    const auto& s = options_.snapshots;
    return static_cast<size_t>(std::lower_bound(s.begin(), s.end(), seq) - s.begin());
  }

  Status Consume(const leveldb::Slice& ikey, const leveldb::Slice& value) {
    ParsedInternalKey p;
    if (!ParseInternalKey(ikey, &p)) {
      return Status::Corruption("compaction input: malformed internal key of " +
                                std::to_string(ikey.size()) + " bytes: '" + EscapeKeyForMessage(ikey) +
                                "' (entry " + std::to_string(stats_->input_entries) + ")");
    }
    const uint64_t trailer = PackSequenceAndType(p.sequence, p.type);
    const int r = has_user_key_ ? ucmp_->Compare(p.user_key, user_key_) : 1;
    if (r < 0 || (r == 0 && trailer >= last_trailer_)) {
      return Status::Corruption("compaction input out of order at user key '" +
                                EscapeKeyForMessage(p.user_key) + "' sequence " + std::to_string(p.sequence) +
                                " (entry " + std::to_string(stats_->input_entries) + ")");
    }
    if (r > 0) {
      EndUserKey();
      user_key_.assign(p.user_key.data(), p.user_key.size());
      has_user_key_ = true;
      last_stripe_ = kNoStripe;
    }
    last_trailer_ = trailer;

    const size_t stripe = StripeOf(p.sequence);
    if (stripe == last_stripe_) {  // shadowed (rule 1)
      ++stats_->dropped_entries;
      return Status::OK();
    }
    last_stripe_ = stripe;
    if (!options_.bottommost) return Emit(ikey, value);

    // Rule 2: a kept deletion waits for the next kept version of its key.
    if (p.type == kTypeDeletion) {
      if (has_pending_) DropPending();  // a deletion right above another hides nothing more
      pending_ikey_.assign(ikey.data(), ikey.size());
      pending_value_.assign(value.data(), value.size());
      has_pending_ = true;
      return Status::OK();
    }
    if (has_pending_) {
      has_pending_ = false;
      NOVA_RETURN_NOT_OK(Emit(pending_ikey_, pending_value_));  // it hides this value
    }
    return Emit(ikey, value);
  }

  // The current user key has no more versions: a pending deletion hides nothing (rule 2).
  void EndUserKey() {
    if (has_pending_) DropPending();
  }

  void DropPending() {
    has_pending_ = false;
    ++stats_->dropped_entries;
    ++stats_->dropped_deletions;
  }

  // Writes a kept entry, first switching outputs if this starts a new user key and the
  // size limit or a split key says so.
  Status Emit(const leveldb::Slice& ikey, const leveldb::Slice& value) {
    const leveldb::Slice user_key = ExtractUserKey(ikey);
    if (!has_emitted_ || ucmp_->Compare(user_key, last_emitted_user_key_) != 0) {
      const bool crosses_split = PassSplitKeys(user_key);
      if (output_open_ && (crosses_split || sink_->CurrentBytes() >= options_.max_output_bytes)) {
        output_open_ = false;
        NOVA_RETURN_NOT_OK_PREPEND(sink_->FinishOutput(), "finishing output");
      }
      if (!output_open_) {
        NOVA_RETURN_NOT_OK_PREPEND(sink_->StartOutput(), "starting output");
        output_open_ = true;
        ++stats_->outputs;
      }
      last_emitted_user_key_.assign(user_key.data(), user_key.size());
      has_emitted_ = true;
    }
    NOVA_RETURN_NOT_OK_PREPEND(sink_->Add(ikey, value), "adding to output");
    ++stats_->output_entries;
    return Status::OK();
  }

  // Advances next_split_ past every split key <= user_key. Returns true if it moved, i.e.
  // a split key lies between the previous emitted user key and this one.
  bool PassSplitKeys(const leveldb::Slice& user_key) {
    const auto& splits = options_.split_user_keys;
    bool passed = false;
    while (next_split_ < splits.size() && ucmp_->Compare(splits[next_split_], user_key) <= 0) {
      ++next_split_;
      passed = true;
    }
    return passed;
  }

  const CompactionMergeOptions& options_;
  const leveldb::Comparator* const ucmp_;
  CompactionOutputSink* const sink_;
  CompactionStats* const stats_;

  // The user key being read and the last version of it read.
  std::string user_key_;
  bool has_user_key_ = false;
  uint64_t last_trailer_ = 0;
  size_t last_stripe_ = kNoStripe;  // stripe of its last kept version

  // Bottommost only: a kept deletion of user_key_ not yet emitted.
  std::string pending_ikey_;
  std::string pending_value_;
  bool has_pending_ = false;

  // Output state.
  bool output_open_ = false;
  std::string last_emitted_user_key_;
  bool has_emitted_ = false;
  size_t next_split_ = 0;  // first split key > last_emitted_user_key_
};

}  // namespace

Status RunCompactionMerge(leveldb::Iterator* input, const CompactionMergeOptions& options,
                          CompactionOutputSink* sink, CompactionStats* stats) {
  CompactionStats local;
  Status s = CheckOptions(options);
  if (s.ok() && (input == nullptr || sink == nullptr)) {
    s = Status::InvalidArgument("input or sink is null");
  }
  if (s.ok()) s = CompactionMerger(options, sink, &local).Run(input);
  if (stats != nullptr) *stats = local;
  return s;
}

}  // namespace nova::lsm
