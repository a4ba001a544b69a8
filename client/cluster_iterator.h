// A leveldb::Iterator over a Nova-LSM cluster, built on forward Scan pages (the protocol
// has no reverse scan), and the conversion of our Status into leveldb's. Internal to the
// DB adapter (nova_db.h), which documents the user-visible semantics.
//
// How it moves:
//   - Seek/SeekToFirst/Next load one forward page of up to `page` pairs; Next past a page's
//     end loads the page after its last key.
//   - SeekToLast/Prev past a page's start need the keys *before* a position: the iterator
//     scans forward from the start of the range holding the position, keeping the last
//     `page` keys below it, and walks to earlier ranges while it finds none. A backward
//     page therefore costs a scan of its range from the range's start to the position:
//     fine for short reverse walks, slow for reverse scans of large ranges.
//   - Each page is a separate read: pages are read-committed (or, over a snapshot source,
//     consistent within each range; see nova_db.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "leveldb/iterator.h"
#include "leveldb/status.h"

namespace nova::client {

using KeyValue = std::pair<std::string, std::string>;

// Where the pages come from: the latest data or a snapshot. Used by one iterator (one
// thread at a time).
class PageSource {
 public:
  virtual ~PageSource() = default;
  // Appends up to `count` pairs with key >= start to *out, ascending. *exhausted is set
  // when no key follows the last pair appended (the key space ended).
  virtual Status Forward(const std::string& start, size_t count, std::vector<KeyValue>* out,
                         bool* exhausted) = 0;
  // The start keys of the cluster's ranges, ascending; the first is "" (the smallest key).
  virtual std::vector<std::string> RangeStarts() = 0;
};

// A new iterator (owned by the caller) reading `source` in pages of `page` pairs (>= 1).
// Errors show as !Valid() with status() set; the iterator stays in that state until the
// next Seek*.
leveldb::Iterator* NewClusterIterator(std::unique_ptr<PageSource> source, size_t page);

// Our Status as leveldb's: NotFound, Corruption, NotSupported and InvalidArgument keep
// their kind; every other code (network, timeouts, WrongRange, ...) becomes IOError with
// the code's name kept in the message.
leveldb::Status ToLevelDbStatus(const Status& s);

}  // namespace nova::client
