// A leveldb::Iterator over a Nova-LSM cluster, built on Scan pages in both directions, and
// the conversion of our Status into leveldb's. Internal to the DB adapter (nova_db.h),
// which documents the user-visible semantics.
//
// How it moves:
//   - Seek/SeekToFirst load one forward page of up to `page` pairs (keys >= target); Next
//     past a page's end loads the forward page after its last key.
//   - SeekToLast loads one backward page (the last `page` keys); Prev past a page's start
//     loads the backward page below its first key. A backward page is one reverse Scan
//     (per range it crosses), so walking backwards costs what walking forwards does.
//   - A page that reached an end of the key space is remembered: stepping off that end
//     needs no request.
//   - The pages come from a PageSource; which state they show (one snapshot per range) is
//     the source's business.
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

// Where the pages come from. Used by one iterator (one thread at a time).
class PageSource {
 public:
  virtual ~PageSource() = default;
  // Appends up to `count` pairs with key >= start to *out, ascending. *exhausted is set
  // when no key follows the last pair appended (the key space ended).
  virtual Status Forward(const std::string& start, size_t count, std::vector<KeyValue>* out,
                         bool* exhausted) = 0;
  // Appends up to `count` pairs with key < before to *out, descending; an empty `before`
  // means from the last key (no key is below the empty key, so nothing is lost).
  // *exhausted is set when no key precedes the last pair appended (the key space began).
  virtual Status Backward(const std::string& before, size_t count, std::vector<KeyValue>* out,
                          bool* exhausted) = 0;
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
