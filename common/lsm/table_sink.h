// TableSink: turns the output of a flush or compaction merge into tables written to a
// TableStore (one FragmentedTableBuilder per output), collecting their metadata.
//
// Thread safety: not thread-safe (one merge writes it).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "common/lsm/compaction_merge.h"
#include "common/lsm/fragmented_table.h"
#include "common/lsm/table_meta.h"
#include "common/lsm/table_store.h"

namespace nova::lsm {

class TableSink : public CompactionOutputSink {
 public:
  using NumberFn = std::function<uint64_t()>;
  TableSink(const InternalKeyComparator* icmp, const TableBuildOptions& opts,
            TableStore* store, NumberFn next_number, uint32_t drange)
      : icmp_(icmp), opts_(opts), store_(store), next_number_(std::move(next_number)),
        drange_(drange) {}
  Status StartOutput() override {
    builder_ = std::make_unique<FragmentedTableBuilder>(icmp_, opts_);
    smallest_seq_ = kMaxSequenceNumber;
    largest_seq_ = 0;
    return Status::OK();
  }
  Status Add(const leveldb::Slice& ikey, const leveldb::Slice& value) override {
    ParsedInternalKey p;
    if (!ParseInternalKey(ikey, &p)) return Status::Corruption("malformed key in output");
    smallest_seq_ = std::min(smallest_seq_, p.sequence);
    largest_seq_ = std::max(largest_seq_, p.sequence);
    builder_->Add(ikey, value);
    return Status::OK();
  }
  uint64_t CurrentBytes() const override { return builder_ ? builder_->FileSize() : 0; }
  Status FinishOutput() override {
    BuiltTable built;
    NOVA_RETURN_NOT_OK(builder_->Finish(&built));
    builder_.reset();
    TableMeta meta;
    meta.number = next_number_();
    meta.smallest = built.smallest;
    meta.largest = built.largest;
    meta.num_entries = built.num_entries;
    meta.smallest_sequence = smallest_seq_;
    meta.largest_sequence = largest_seq_;
    meta.drange = drange_;
    meta.layout = built.layout;
    NOVA_RETURN_NOT_OK(store_->WriteTable(meta.number, built, &meta));
    outputs_.push_back(std::move(meta));
    return Status::OK();
  }
  std::vector<TableMeta>& outputs() { return outputs_; }
  // Deletes what was written (after a failed compaction).
  void Discard() {
    for (const TableMeta& m : outputs_) store_->DeleteTable(m).IgnoreError();
    outputs_.clear();
  }

 private:
  const InternalKeyComparator* icmp_;
  const TableBuildOptions opts_;
  TableStore* store_;
  NumberFn next_number_;
  uint32_t drange_;
  std::unique_ptr<FragmentedTableBuilder> builder_;
  SequenceNumber smallest_seq_ = 0, largest_seq_ = 0;
  std::vector<TableMeta> outputs_;
};


}  // namespace nova::lsm
