#include "logc/client/log_recovery_reader.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <glog/logging.h>

namespace nova::logc {

using internal::HeldBytes;
using internal::Log;
using internal::LogName;
using internal::NewStaging;
using internal::Replica;
using internal::WaitOp;

LogRecoveryReader::LogRecoveryReader(const internal::LogParts& parts) : parts_(parts) {}

// ---- Recovery ---------------------------------------------------------------------

Status LogRecoveryReader::ReadSegment(const SegmentToRead& seg, std::string* out,
                                      std::vector<size_t>* holders, uint64_t* length) {
  holders->clear();
  *length = 0;
  const LogMode mode = parts_.settings->mode.load();
  const bool memory = mode == LogMode::kMemory;
  Status last = Status::Unavailable("no replica");
  std::string candidate;
  int64_t best = -1;  // memory: index of the last non-zero byte of the best copy read
  for (size_t k = 0; k < seg.sources.size(); ++k) {
    const auto& src = seg.sources[k];
    candidate.clear();
    const LogFileInfo& f = src.info;
    if (mode == LogMode::kDisk && f.persisted) {
      // From the LogC's disk, page by page.
      ReadLogRequest req{seg.range, seg.memtable, seg.segment, 0, f.persisted_length};
      last = Status::OK();
      while (true) {
        req.offset = candidate.size();
        req.length = UINT64_MAX;
        auto reply =
            parts_.endpoint->CallSync(src.peer, kReadLog, Encode(req), parts_.options->timeout);
        if (!reply.ok()) {
          last = reply.status();
          break;
        }
        ReadLogResponse resp;
        last = Decode(reply.value(), &resp);
        if (!last.ok()) break;
        candidate.append(resp.data);
        if (resp.data.empty() || candidate.size() >= resp.persisted_length) break;
      }
    } else {
      // One one-sided READ: what the LogC received of a persisted file, a memory file whole.
      const uint64_t n = f.persisted ? f.length : f.capacity;
      Status error;
      auto st = n == 0 ? nullptr : NewStaging(parts_.endpoint->transport(), n, &error);
      if (n != 0 && st == nullptr) return error;
      last = n == 0 ? Status::OK()
                    : WaitOp(
                          st,
                          [&](transport::Completion done) {
                            return parts_.endpoint->transport()->Read(src.peer, f.addr, n, st->mr,
                                                                      0, std::move(done));
                          },
                          parts_.options->timeout);
      if (last.ok() && n != 0) candidate.assign(st->mem.get(), n);
    }
    if (!last.ok()) {
      LOG(WARNING) << "reading " << LogName(seg.range, seg.memtable) << " segment "
                   << seg.segment << " from LogC " << src.logc_id << ": " << last.ToString();
      // A copy that cannot be read may be the only one holding every acknowledged byte:
      // in memory mode any copy may be the longest; otherwise another source listed with
      // as much is as good, and a shorter one never is. The open is retried (a LogC that
      // died is then unlisted, and counts against M).
      if (memory) return last.Prepend("a copy could not be read");
      const uint64_t longest = HeldBytes(mode, seg.sources.front().info);
      if (k + 1 >= seg.sources.size() || HeldBytes(mode, seg.sources[k + 1].info) < longest) {
        return last.Prepend("no copy holding all of it could be read");
      }
      continue;
    }
    if (!memory) {
      // Sources are sorted by length: the first read is the longest; the others that hold
      // as much hold the same bytes (every copy is a prefix of one stream).
      out->swap(candidate);
      const uint64_t have = HeldBytes(mode, f);
      *length = out->size();
      for (size_t j = 0; j < seg.sources.size(); ++j) {
        if (j == k || HeldBytes(mode, seg.sources[j].info) >= have) holders->push_back(j);
      }
      return Status::OK();
    }
    // A memory file does not know its length, and a copy that was dropped, or being
    // re-replicated, holds only a prefix: every copy is read and the one reaching furthest
    // wins (ties hold the same bytes: a longer copy adds a record header, never only zeros).
    int64_t last_nonzero = static_cast<int64_t>(candidate.size()) - 1;
    while (last_nonzero >= 0 && candidate[static_cast<size_t>(last_nonzero)] == 0) --last_nonzero;
    if (last_nonzero > best) {
      best = last_nonzero;
      out->swap(candidate);
      holders->clear();
    }
    if (last_nonzero == best) holders->push_back(k);
  }
  if (holders->empty()) return last;
  *length = static_cast<uint64_t>(best + 1);
  return Status::OK();
}

void LogRecoveryReader::AdoptRecovered(const SegmentToRead* const* segments, size_t n,
                                       const std::vector<std::string>& holders,
                                       const std::vector<uint64_t>& lengths) {
  if (n == 0) return;
  auto log = std::make_shared<Log>();
  log->range = segments[0]->range;
  log->memtable = segments[0]->memtable;
  {
    MutexLock lock(&log->mu);  // not shared yet: for the analysis
    log->recovered = true;
    for (size_t k = 0; k < n; ++k) {
      const auto& src = segments[k]->sources.front();
      log->capacity.push_back(src.info.capacity);
    }
    log->written = lengths.back();
    for (const std::string& id : holders) {
      auto rep = std::make_shared<Replica>();
      rep->logc_id = id;
      for (size_t k = 0; k < n; ++k) {
        for (const auto& src : segments[k]->sources) {
          if (src.logc_id != id) continue;
          rep->peer = src.peer;
          rep->incarnation = src.incarnation;
          Replica::Segment seg;
          seg.handle = src.info.handle;
          seg.addr = src.info.addr;
          seg.persisted = src.info.persisted_length;
          rep->segments.push_back(seg);
        }
      }
      if (rep->segments.size() == n) log->replicas.push_back(rep);
    }
  }
  parts_.registry->Adopt(std::move(log));
}

Status LogRecoveryReader::ReadAll(uint32_t range, int threads, bool new_range,
                                  const LogClient::ReadFilter& read,
                                  std::vector<LogClient::RecoveredLog>* logs,
                                  std::vector<uint64_t>* missing) {
  logs->clear();
  missing->clear();
  if (parts_.settings->mode.load() == LogMode::kNone) {
    return Status::InvalidArgument("log mode none: there are no logs to read");
  }
  const std::vector<std::string> ids = parts_.logcs->ConfiguredIds();
  std::set<uint64_t> expected =
      parts_.registry->WrittenMemtables(range);  // memtables this client wrote
  // memtable -> segment -> sources
  std::map<uint64_t, std::map<uint32_t, SegmentToRead>> found;
  std::vector<std::string> unlisted;  // LogCs whose logs we could not list
  std::vector<std::string> unsynced;  // listed, but not in sync for the range
  for (const std::string& id : ids) {
    transport::PeerId peer = transport::kInvalidPeer;
    auto listed = parts_.registry->ListAt(id, range, &peer);
    if (!listed.ok()) {
      LOG(WARNING) << "listing logs of range " << range << " at LogC " << id << ": "
                   << listed.status().ToString();
      unlisted.push_back(id + " (" + listed.status().ToString() + ")");
      continue;
    }
    const ListLogsResponse& list = listed.value();
    if (list.in_sync) {
      parts_.logcs->NoteInSync(id, list.incarnation, range);
    } else {
      unsynced.push_back(id);
    }
    for (const LogFileInfo& f : list.files) {
      SegmentToRead& seg = found[f.memtable][f.segment];
      seg.range = range;
      seg.memtable = f.memtable;
      seg.segment = f.segment;
      seg.sources.push_back(SegmentToRead::Source{id, peer, f, list.incarnation});
    }
  }
  // Every acknowledged write was on min_insync_replicas LogCs when it was acknowledged. A
  // LogC that cannot be listed, or that is not in sync for the range (it restarted and lost
  // its memory copies, or a new disk; it was never marked), may be the only one left of
  // those: with that many such LogCs, a log may be on none of the others, and recovering
  // without it would lose acknowledged writes. The caller retries (the range waits).
  const bool forced = std::find(parts_.options->force_recovery_ranges.begin(),
                                parts_.options->force_recovery_ranges.end(),
                                range) != parts_.options->force_recovery_ranges.end();
  const size_t suspects = unlisted.size() + unsynced.size();
  if (!new_range && static_cast<int>(suspects) >= parts_.settings->InsyncTarget()) {
    std::string who;
    for (const auto& u : unlisted) who += (who.empty() ? "" : ", ") + u;
    for (const auto& u : unsynced) {
      who += (who.empty() ? "" : ", ") + u + " (not in sync: restarted without its copies, or new)";
    }
    const std::string why = "range " + std::to_string(range) + ": " + std::to_string(suspects) +
                            " LogC(s) cannot vouch for their logs (" + who +
                            "), and a write is acknowledged on " +
                            std::to_string(parts_.settings->InsyncTarget()) +
                            " of them: a log with acknowledged writes may be on " + "those only";
    if (!forced) {
      parts_.m->recovery_refusals->Increment();
      parts_.registry->Block(range);
      LOG_EVERY_N(WARNING, 10) << "recovery waits: " << why;
      return Status::Unavailable(why + "; waiting for them");
    }
    LOG(ERROR) << "recovery forced by --ltc_force_recovery_ranges although " << why
               << ": writes acknowledged only in logs there are lost";
  }
  {
    // The range's recovery goes on: from now on the repairer may mark it in sync (never
    // before: a refused range has logs this client does not know of, and marking a LogC
    // that lost them would make the next attempt go on without them).
    parts_.registry->Unblock(range);
  }
  // Logs only to list (the caller has their contents already): nothing of them is read.
  std::set<uint64_t> list_only;
  for (const auto& [memtable, segments] : found) {
    if (read && !read(memtable)) list_only.insert(memtable);
  }
  parts_.registry->NoteUnread(range, std::vector<uint64_t>(list_only.begin(), list_only.end()));
  // Best source first: the one that received (or persisted) the most.
  std::vector<SegmentToRead*> work;
  for (auto& [memtable, segments] : found) {
    if (list_only.count(memtable) != 0) continue;
    for (auto& [number, seg] : segments) {
      const LogMode mode = parts_.settings->mode.load();
      std::stable_sort(seg.sources.begin(), seg.sources.end(), [&](const auto& a, const auto& b) {
        return HeldBytes(mode, a.info) > HeldBytes(mode, b.info);
      });
      work.push_back(&seg);
    }
  }
  std::vector<std::string> bytes(work.size());
  std::vector<Status> status(work.size());
  std::vector<std::vector<size_t>> holders(work.size());
  std::vector<uint64_t> lengths(work.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < work.size(); i = next++)
      status[i] = ReadSegment(*work[i], &bytes[i], &holders[i], &lengths[i]);
  };
  std::vector<std::thread> pool;
  const size_t n_threads = std::min<size_t>(std::max(1, threads), work.size());
  for (size_t t = 0; t < n_threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();

  size_t i = 0;
  std::vector<uint64_t> lost;
  uint64_t lost_bytes = 0;  // as listed: what the lost logs held at most
  for (auto& [memtable, segments] : found) {
    LogClient::RecoveredLog log;
    log.memtable = memtable;
    if (list_only.count(memtable) != 0) {
      expected.erase(memtable);
      log.read = false;
      logs->push_back(std::move(log));
      continue;
    }
    bool complete = true;
    uint32_t expect_segment = 0;
    const size_t first = i;
    std::map<std::string, size_t> held;  // LogC -> segments it holds all of
    for (auto& [number, seg] : segments) {
      if (number != expect_segment++) complete = false;  // a segment no replica lists
      if (!status[i].ok()) complete = false;
      log.bytes += bytes[i];
      for (size_t h : holders[i]) ++held[seg.sources[h].logc_id];
      ++i;
    }
    expected.erase(memtable);
    if (!complete) {
      (forced ? lost : *missing).push_back(memtable);
      for (auto& [number, seg] : segments) {
        uint64_t most = 0;
        for (const auto& src : seg.sources) {
          const LogFileInfo& f = src.info;
          most = std::max(most, f.persisted ? std::max(f.length, f.persisted_length) : f.capacity);
        }
        lost_bytes += most;
      }
      continue;
    }
    for (auto& [id, count] : held) {
      if (count == segments.size()) log.replicas.push_back(id);
    }
    std::vector<uint64_t> segment_lengths(lengths.begin() + static_cast<ptrdiff_t>(first),
                                          lengths.begin() + static_cast<ptrdiff_t>(i));
    AdoptRecovered(work.data() + first, segments.size(), log.replicas, segment_lengths);
    logs->push_back(std::move(log));
  }
  for (uint64_t m : expected) {
    if (read && !read(m)) continue;  // not to be read: whether it exists does not matter
    (forced ? lost : *missing).push_back(m);
  }
  std::sort(missing->begin(), missing->end());
  if (!lost.empty()) {
    std::string list;
    for (uint64_t m : lost) list += (list.empty() ? "" : ",") + std::to_string(m);
    LOG(ERROR) << "range " << range << ": forced recovery goes on without the logs of "
               << lost.size() << " memtable(s) (" << list << "; up to " << lost_bytes
               << " log bytes as listed, memory logs counted at their capacity): the writes "
               << "acknowledged in them since the range's last flush are lost";
  }
  if (forced && !unlisted.empty()) {
    LOG(ERROR) << "range " << range << ": forced recovery goes on without " << unlisted.size()
               << " LogC(s) it could not list: the logs only they held (any number, of up to "
               << "a memtable each) are lost";
  }
  parts_.repairer->Wake();  // re-replicate what was read at fewer than R replicas
  return Status::OK();
}

}  // namespace nova::logc
