#include "common/fault_point.h"

#include <glog/logging.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace nova {

namespace {

enum class Action { kError, kDelay, kAbort };

struct Point {
  std::string entry;  // the spec entry it was armed from, for logs
  Action action = Action::kError;
  std::chrono::milliseconds delay{0};
  bool once = false;
  double probability = 1.0;
  uint64_t after = 0;
  // Updated by hits.
  uint64_t hits = 0;
  uint64_t fires = 0;
  bool warned_void = false;
  std::mt19937_64 rng;
};

// The armed points. Allocated once and never destroyed: a detached thread may hit a
// point while the process exits, after static destructors would have run.
struct Table {
  Mutex mu;
  std::map<std::string, Point, std::less<>> points GUARDED_BY(mu);
};

Table& GetTable() {
  static Table* table = new Table;
  return *table;
}

void UpdateAnyArmedLocked(const Table& table) REQUIRES(table.mu) {
  fault_internal::g_any_armed.store(!table.points.empty(), std::memory_order_relaxed);
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    size_t pos = s.find(sep);
    parts.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return parts;
    s.remove_prefix(pos + 1);
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool IsValidPointName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Parses all of `s` as a decimal uint64.
bool ParseUint(std::string_view s, uint64_t* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

// "<N>ms" or "<N>s".
bool ParseDuration(std::string_view s, std::chrono::milliseconds* out) {
  uint64_t n = 0;
  if (s.ends_with("ms") && ParseUint(s.substr(0, s.size() - 2), &n)) {
    *out = std::chrono::milliseconds(n);
    return true;
  }
  if (s.ends_with("s") && ParseUint(s.substr(0, s.size() - 1), &n)) {
    *out = std::chrono::seconds(n);
    return true;
  }
  return false;
}

// Parses one "name=action[:option...]" entry. Returns InvalidArgument saying why not.
Status ParseEntry(std::string_view entry, std::string* name, Point* point) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("bad fault point spec entry '" + std::string(entry) +
                                   "': " + std::string(why));
  };
  size_t eq = entry.find('=');
  if (eq == std::string_view::npos) return bad("expected <name>=<action>");
  std::string_view n = entry.substr(0, eq);
  if (!IsValidPointName(n)) return bad("name must be non-empty [A-Za-z0-9_.-]");
  *name = std::string(n);
  point->entry = std::string(entry);

  std::vector<std::string_view> parts = Split(entry.substr(eq + 1), ':');
  size_t next = 1;
  if (parts[0] == "error") {
    point->action = Action::kError;
  } else if (parts[0] == "abort") {
    point->action = Action::kAbort;
  } else if (parts[0] == "delay") {
    point->action = Action::kDelay;
    if (parts.size() < 2 || !ParseDuration(parts[1], &point->delay)) {
      return bad("delay needs a duration such as delay:200ms or delay:2s");
    }
    next = 2;
  } else {
    return bad("unknown action '" + std::string(parts[0]) + "' (want error, delay:<N>ms or abort)");
  }

  for (size_t i = next; i < parts.size(); ++i) {
    std::string_view opt = parts[i];
    if (opt == "once") {
      point->once = true;
    } else if (opt.starts_with("p=")) {
      std::string_view v = opt.substr(2);
      double p = -1;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), p);
      // The negated comparison also rejects NaN.
      if (v.empty() || ec != std::errc() || end != v.data() + v.size() || !(p >= 0 && p <= 1)) {
        return bad("p= needs a probability in [0, 1]");
      }
      point->probability = p;
    } else if (opt.starts_with("after=")) {
      if (!ParseUint(opt.substr(6), &point->after)) return bad("after= needs a hit count");
    } else {
      return bad("unknown option '" + std::string(opt) + "' (want once, p=<prob> or after=<N>)");
    }
  }
  point->rng.seed(std::hash<std::string_view>()(n));
  return Status::OK();
}

// What one hit of a point decided.
struct Decision {
  bool fire = false;
  Action action = Action::kError;
  std::chrono::milliseconds delay{0};
  bool warn_void = false;  // first 'error' fire at a void point
};

Decision Decide(std::string_view name, bool is_void) {
  Decision d;
  Table& table = GetTable();
  MutexLock l(&table.mu);
  auto it = table.points.find(name);
  if (it == table.points.end()) return d;
  Point& p = it->second;
  ++p.hits;
  if (p.hits <= p.after) return d;
  if (p.once && p.fires > 0) return d;
  if (p.probability < 1.0 && std::uniform_real_distribution<double>(0, 1)(p.rng) >= p.probability) {
    return d;
  }
  ++p.fires;
  d.fire = true;
  d.action = p.action;
  d.delay = p.delay;
  if (is_void && p.action == Action::kError && !p.warned_void) {
    p.warned_void = true;
    d.warn_void = true;
  }
  return d;
}

// Carries out delay and abort; returns the Status an 'error' yields.
Status Act(std::string_view name, const Decision& d) {
  if (!d.fire) return Status::OK();
  switch (d.action) {
    case Action::kError:
      return Status::IOError("injected fault at " + std::string(name));
    case Action::kDelay:
      std::this_thread::sleep_for(d.delay);
      return Status::OK();
    case Action::kAbort: {
      // Raw write(2): no allocation, no buffering that _exit would lose.
      constexpr char kPrefix[] = "nova: fault point abort at ";
      if (::write(STDERR_FILENO, kPrefix, sizeof(kPrefix) - 1) < 0 ||
          ::write(STDERR_FILENO, name.data(), name.size()) < 0 ||
          ::write(STDERR_FILENO, "\n", 1) < 0) {
        // Nothing to do: we are about to exit anyway.
      }
      ::_exit(kFaultExitCode);
    }
  }
  return Status::OK();
}

}  // namespace

Status FaultPoints::Arm(std::string_view spec) {
  std::vector<std::pair<std::string, Point>> parsed;
  if (!Trim(spec).empty()) {
    for (std::string_view entry : Split(spec, ',')) {
      entry = Trim(entry);
      if (entry.empty()) {
        return Status::InvalidArgument("bad fault point spec '" + std::string(spec) +
                                       "': empty entry");
      }
      std::string name;
      Point point;
      NOVA_RETURN_NOT_OK(ParseEntry(entry, &name, &point));
      for (const auto& [other, unused] : parsed) {
        if (other == name) {
          return Status::InvalidArgument("bad fault point spec '" + std::string(spec) +
                                         "': point '" + name + "' armed twice");
        }
      }
      parsed.emplace_back(std::move(name), std::move(point));
    }
  }
  Table& table = GetTable();
  MutexLock l(&table.mu);
  for (auto& [name, point] : parsed) {
    LOG(WARNING) << "fault point armed: " << point.entry;
    table.points.insert_or_assign(std::move(name), std::move(point));
  }
  UpdateAnyArmedLocked(table);
  return Status::OK();
}

void FaultPoints::Disarm(std::string_view name) {
  Table& table = GetTable();
  MutexLock l(&table.mu);
  auto it = table.points.find(name);
  if (it != table.points.end()) table.points.erase(it);
  UpdateAnyArmedLocked(table);
}

void FaultPoints::DisarmAll() {
  Table& table = GetTable();
  MutexLock l(&table.mu);
  table.points.clear();
  UpdateAnyArmedLocked(table);
}

uint64_t FaultPoints::HitCount(std::string_view name) {
  Table& table = GetTable();
  MutexLock l(&table.mu);
  auto it = table.points.find(name);
  return it == table.points.end() ? 0 : it->second.hits;
}

uint64_t FaultPoints::FireCount(std::string_view name) {
  Table& table = GetTable();
  MutexLock l(&table.mu);
  auto it = table.points.find(name);
  return it == table.points.end() ? 0 : it->second.fires;
}

Status FaultPoints::Hit(std::string_view name) { return Act(name, Decide(name, false)); }

void FaultPoints::HitVoid(std::string_view name) {
  Decision d = Decide(name, true);
  if (d.warn_void) {
    LOG(WARNING) << "fault point " << name
                 << " cannot return an error here; its 'error' action has no effect";
  }
  if (d.fire && d.action != Action::kError) Act(name, d).IgnoreError();
}

}  // namespace nova
