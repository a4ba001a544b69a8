// A leveldb::DB over a Nova-LSM cluster (DESIGN.md section 9): a LevelDB application
// switches to the cluster by replacing DB::Open with nova::client::OpenDB. Every call goes
// through NovaClient (nova_client.h); docs/client.md describes the semantics in full.
//
// What differs from a local LevelDB, call by call:
//   Put/Delete/Get    as LevelDB (routed to the LTC owning the key, retried on failover
//                     until ClientOptions::timeout). WriteOptions::sync is ignored: the
//                     cluster decides durability. A key or value over the LTC's
//                     --ltc_max_key_bytes / --ltc_max_value_bytes is InvalidArgument naming
//                     the flag, at once (the client knows every LTC's limits).
//   Write(batch)      split by range; each range's part is atomic. Every part is checked
//                     against its LTC's limits (--ltc_max_batch_ops, --ltc_max_key_bytes,
//                     --ltc_max_value_bytes, --ltc_max_request_mb) before any is sent: a
//                     batch refused so fails at once with InvalidArgument naming the flag and
//                     applies nothing. Once sent, parts in different ranges are independent:
//                     a Write that fails after that (an LTC died or did not answer in time)
//                     may have applied some parts; its message says so.
//   NewIterator       forward and backward over all ranges, in pages of
//                     NovaDBOptions::iterator_page_pairs (forward and reverse Scans: a
//                     backward walk costs what a forward one does). The iterator is an
//                     implicit snapshot: without ReadOptions::snapshot, NewIterator takes
//                     one LTC snapshot per range as GetSnapshot does (all requests at once:
//                     about one round trip, not one per range) and releases them when the
//                     iterator is deleted (a lost connection releases them anyway); every
//                     page, in every range and either direction, shows that range's state at
//                     NewIterator(). If they cannot be taken the iterator is !Valid() with
//                     an error status() (never the latest data instead); so is a read whose
//                     snapshot's LTC died. With ReadOptions::snapshot it reads at that
//                     snapshot and takes none.
//   GetSnapshot       takes one LTC snapshot per range of the current routing table (at
//                     slightly different instants, all within the GetSnapshot call). A read
//                     at the snapshot sees, in each range, that range's state at its
//                     instant: every write acknowledged before GetSnapshot was called is
//                     visible, none started after it returned is, and a write concurrent
//                     with the call may be visible in one range and not in another. Reads at
//                     a snapshot never fall back to the latest data: they fail (IOError)
//                     when the snapshot could not be taken for the key's range, when the
//                     LTC holding it died or the range moved (snapshots live on one LTC
//                     connection), or after ReleaseSnapshot. The ranges' snapshots are
//                     requested all at once (about one round trip, not one per range).
//                     A snapshot that cannot be taken (an LTC unreachable, a range with no
//                     LTC) is still returned, never null (null means "latest" in LevelDB):
//                     it holds no LTC snapshot and every read at it fails at once (IOError)
//                     with the reason; TakeSnapshot below returns that reason instead.
//   GetProperty       "nova.stats" (every LTC's Stats text), "nova.routing" (epoch and
//                     range -> LTC lines), "nova.num-ranges", and LevelDB's
//                     "leveldb.num-files-at-level<N>", "leveldb.sstables",
//                     "leveldb.approximate-memory-usage" and "leveldb.stats" summed over
//                     the ranges (nova_db_admin.h has the formats).
//   GetApproximateSizes  from the LTCs' table metadata plus their memtables' bytes in the
//                     range (LevelDB counts tables only).
//   CompactRange      flushes the ranges holding the keys and compacts them down on their
//                     LTCs, in parallel; returns when done (or at
//                     ClientOptions::compact_range_timeout, an hour by default).
//
// Thread safety: the DB is thread-safe, as LevelDB's; an iterator is used by one thread at
// a time. Snapshots and iterators must be released/deleted before the DB.
#pragma once

#include <cstddef>
#include <string>

#include "client/nova_client.h"
#include "leveldb/db.h"
#include "leveldb/options.h"
#include "leveldb/status.h"

namespace nova::client {

struct NovaDBOptions {
  // Timeouts, connections per LTC, backoff. To route with a RoutingSource of your own (a
  // configuration watcher), set client.routing_source (it must outlive the DB) and pass an
  // empty URI; `ltcs` is taken from the URI.
  ClientOptions client;
  // Pairs per iterator page (one forward or reverse Scan request per range it crosses).
  size_t iterator_page_pairs = 1000;
};

// Opens the cluster named by `uri`:
//   nova://ltc=host:port[,host:port...]      a static list of LTCs
//   nova://zkhost:port[,zkhost:port...]/name a ZooKeeper-managed cluster: routes by its
//                                           configuration in ZooKeeper, following it
// On success stores the DB in *dbptr (the caller deletes it) and returns OK; else *dbptr
// is null and the status says why: InvalidArgument for a bad URI, a comparator other than
// the bytewise one (the cluster orders keys bytewise) or error_if_exists (a cluster always
// exists); IOError when no LTC can be reached, or in ZooKeeper mode when no ZooKeeper
// session is established within nova_options.client.zk_open_timeout (2 s); NotFound when
// the cluster does not exist in ZooKeeper. Other leveldb::Options are ignored
// (create_if_missing is implied).
leveldb::Status OpenDB(const leveldb::Options& options, const std::string& uri,
                       leveldb::DB** dbptr);
leveldb::Status OpenDB(const leveldb::Options& options, const std::string& uri,
                       const NovaDBOptions& nova_options, leveldb::DB** dbptr);

// GetSnapshot for a program that knows it talks to a cluster: on success stores the
// snapshot in *snapshot (release it with db->ReleaseSnapshot) and returns OK; when it
// cannot be taken in every range, sets *snapshot to null (nothing to release) and returns
// why (IOError naming the range and its LTC; the code of the cause is in the message).
// REQUIRES: `db` was opened by OpenDB.
leveldb::Status TakeSnapshot(leveldb::DB* db, const leveldb::Snapshot** snapshot);

}  // namespace nova::client
