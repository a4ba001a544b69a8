#include "client/nova_client.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "client/ltc_connection.h"
#include "common/hex.h"
#include "common/mutex.h"
#include "common/retry_policy.h"
#include "common/wire/message.h"
#include "ltc/protocol/client_request.h"

namespace nova::client {
namespace {

// One value handed from a callback to the thread waiting for it. Not std::promise, whose
// set_value makes a futex system call even when nobody waits (a direct call completes on
// its own thread: nobody does); an uncontended Mutex and a CondVar without waiters make
// none. Thread safety: thread-safe.
template <typename T>
class Waiter {
 public:
  void Set(T value) EXCLUDES(mu_) {
    MutexLock l(&mu_);
    value_.emplace(std::move(value));
    cv_.NotifyAll();
  }
  T Take() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    cv_.Wait(&l, [&]() REQUIRES(mu_) { return value_.has_value(); });
    return std::move(*value_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::optional<T> value_ GUARDED_BY(mu_);
};

// A call's outcome: its status and response payload.
using Answer = Waiter<std::pair<Status, std::string>>;

using ltc::ClientMsg;

// Pairs asked for per Scan request; a server may return fewer (its reply size cap).
constexpr uint32_t kScanPage = 10000;

uint16_t T(ClientMsg m) { return static_cast<uint16_t>(m); }

// Sends one request on `conn` and waits for its outcome (no retries).
std::pair<Status, std::string> CallOnce(LtcConnection* conn, ClientMsg type,
                                        std::string_view payload, Deadline deadline) {
  std::promise<std::pair<Status, std::string>> p;
  auto f = p.get_future();
  conn->Call(T(type), payload, deadline,
             [&p](const Status& s, std::string r) { p.set_value({s, std::move(r)}); });
  return f.get();
}

// A Get, Put or Delete: the request shared by its encoder and its limit check (an op's
// attempts run one at a time, so the encoder may set the epoch in place).
std::shared_ptr<ltc::ClientRequest> KeyOp(ClientMsg type, const std::string& key,
                                          const std::string& value) {
  auto r = std::make_shared<ltc::ClientRequest>();
  r->type = type;
  r->key = ltc::KeyRequest{0, key, value, 0};
  return r;
}

std::function<std::string(uint64_t)> EncodeKeyOp(std::shared_ptr<ltc::ClientRequest> r) {
  return [r = std::move(r)](uint64_t epoch) {
    r->key.epoch = epoch;
    return ltc::EncodeKeyRequest(r->type, r->key);
  };
}

// One range's part of a batch, routed, connected and checked: ready to send.
struct WritePart {
  uint32_t range_id = 0;
  std::string address;
  std::shared_ptr<LtcConnection> conn;
  bool direct = false;         // conn is a direct connection (a batch of one part)
  ltc::ClientRequest request;  // kWrite: the part's entries, in batch order
  std::string payload;         // request.write, encoded

  std::string Name() const {
    return "the part for range " + std::to_string(range_id) + " (" +
           std::to_string(request.write.entries.size()) + " operations)";
  }
};

// `s` saying what became of the batch: nothing is applied until a part is sent.
Status WithOutcome(const Status& s, bool maybe_applied) {
  const char* outcome =
      maybe_applied ? "; parts of the batch may have been applied" : "; nothing was applied";
  return Status(s.code(), s.message() + outcome);
}

}  // namespace

const RoutingTable::Route* RoutingTable::Find(std::string_view key) const {
  auto it =
      std::upper_bound(routes.begin(), routes.end(), key,
                       [](std::string_view k, const Route& r) { return k < r.range.keys.start; });
  if (it == routes.begin()) return nullptr;
  --it;
  return it->range.Contains(key) ? &*it : nullptr;
}

const RoutingTable::Route* RoutingTable::FindBelow(std::string_view key) const {
  // The last route starting before `key` is the only candidate (the last route, for "").
  auto it = key.empty() ? routes.end()
                        : std::lower_bound(routes.begin(), routes.end(), key,
                                           [](const Route& r, std::string_view k) {
                                             return r.range.keys.start < k;
                                           });
  if (it == routes.begin()) return nullptr;
  --it;
  return it->range.HoldsKeysBelow(key) ? &*it : nullptr;
}

StaticRoutingSource::StaticRoutingSource(std::vector<std::string> ltcs,
                                         std::chrono::milliseconds timeout,
                                         std::string client_secret)
    : ltcs_(std::move(ltcs)), timeout_(timeout), client_secret_(std::move(client_secret)) {}

Result<RoutingTable> StaticRoutingSource::Fetch() {
  // range id -> (epoch, route) with the highest epoch.
  std::map<std::string, std::pair<uint64_t, RoutingTable::Route>> by_start;
  Status last = Status::NetworkError("no LTC addresses");
  bool any = false;
  uint64_t epoch = 0;
  for (const std::string& addr : ltcs_) {
    const Deadline deadline = Deadline::After(timeout_);
    auto conn = LtcConnection::Connect(addr, deadline, 16ull << 20, client_secret_);
    if (!conn.ok()) {
      last = conn.status();
      continue;
    }
    std::promise<std::pair<Status, std::string>> p;
    auto f = p.get_future();
    conn.value()->Call(T(ClientMsg::kDescribe), "", deadline,
                       [&p](const Status& s, std::string payload) {
                         p.set_value({s, std::move(payload)});
                       });
    auto [s, payload] = f.get();
    conn.value()->Close();
    ltc::DescribeResponse d;
    if (s.ok()) s = ltc::DecodeDescribeResponse(payload, &d);
    if (!s.ok()) {
      last = s.Prepend("describing LTC " + addr);
      continue;
    }
    any = true;
    epoch = std::max(epoch, d.epoch);
    for (const ltc::RangeInfo& r : d.ranges) {
      auto it = by_start.find(r.keys.start);
      if (it == by_start.end() || it->second.first < d.epoch) {
        by_start[r.keys.start] = {d.epoch, RoutingTable::Route{r, addr}};
      }
    }
  }
  if (!any) return last;
  RoutingTable t;
  t.epoch = epoch;
  for (auto& [start, er] : by_start) {
    // Drop a range overlapping the previous one (a stale LTC's claim).
    if (!t.routes.empty()) {
      const ltc::RangeInfo& prev = t.routes.back().range;
      const std::string& next_start = er.second.range.keys.start;
      if (prev.keys.unbounded() || *prev.keys.end > next_start) continue;
    }
    t.routes.push_back(er.second);
  }
  return t;
}

struct NovaClient::Impl {
  explicit Impl(ClientOptions o) : options(std::move(o)) {}

  // One call in flight, with what its retries need.
  struct Op {
    uint16_t type = 0;
    std::string route_key;
    bool route_below = false;  // route to the range holding the keys just below route_key
    std::function<std::string(uint64_t epoch)> encode;
    Deadline deadline = Deadline::Never();
    std::optional<Backoff> backoff;  // from the first retry on
    Status last;
    const char* what = "";
    CallCallback done;
    // Checked against the limits of the LTC it is sent to, before each send (null: none).
    std::shared_ptr<const ltc::ClientRequest> request;
    // Sent on a direct connection by the calling thread (a blocking call's first attempt;
    // retries go through the shared connections from the retry thread).
    bool direct = false;
  };

  const ClientOptions options;
  std::unique_ptr<RoutingSource> own_source;
  RoutingSource* source = nullptr;

  // Routing and connections. mu and retry_mu are never held together; mu comes before
  // LtcConnection::mu_ (Connection() asks a connection whether it is healthy under mu), and
  // LtcConnection never calls back into the client under its lock. No callback runs under
  // either.
  mutable Mutex mu;
  RoutingTable table GUARDED_BY(mu);
  std::map<std::string, std::vector<std::shared_ptr<LtcConnection>>> pools GUARDED_BY(mu);
  // Blocking calls polling for their answer (at most one: common/adaptive_spin.h). Declared
  // before the connections that point at it, so it outlives them.
  std::atomic<int> spinning_calls{0};
  // Direct connections (LtcConnection::ConnectDirect) by address: a blocking call takes
  // one for itself, so there are about as many as threads calling at once, at most
  // options.max_direct_per_ltc (`open`: idle and taken).
  struct DirectPool {
    std::vector<std::shared_ptr<LtcConnection>> idle;
    int open = 0;
    MonoTime retry_after{};  // no new one before (connecting one failed)
  };
  std::map<std::string, DirectPool> direct GUARDED_BY(mu);
  // What each LTC reported of its limits on the newest connection to it (by address).
  std::map<std::string, ltc::ClientLimits> limits GUARDED_BY(mu);
  uint64_t round_robin GUARDED_BY(mu) = 0;
  MonoTime last_refresh GUARDED_BY(mu){};

  RetryPolicy Policy() const { return RetryPolicy{options.initial_backoff, options.max_backoff}; }

  // The retry thread: runs delayed retries in deadline order.
  Mutex retry_mu;
  CondVar retry_cv;
  std::multimap<MonoTime, std::function<void()>> retries GUARDED_BY(retry_mu);
  bool stopping GUARDED_BY(retry_mu) = false;
  std::thread retry_thread;

  void RetryLoop() EXCLUDES(retry_mu) {
    MutexLock l(&retry_mu);
    while (!stopping) {
      if (retries.empty()) {
        retry_cv.Wait(&l);
        continue;
      }
      auto first = retries.begin();
      if (first->first > MonoNow()) {
        retry_cv.WaitUntil(&l, first->first);
        continue;
      }
      auto fn = std::move(first->second);
      retries.erase(first);
      l.Unlock();
      fn();
      l.Lock();
    }
    // Fail what is left: each retry function sees `stopping` and completes its op.
    auto left = std::move(retries);
    l.Unlock();
    for (auto& [when, fn] : left) fn();
  }

  void Refresh() EXCLUDES(mu) {
    {
      MutexLock l(&mu);
      if (MonoNow() - last_refresh < options.initial_backoff) return;
      last_refresh = MonoNow();
    }
    auto t = source->Fetch();
    if (t.ok()) Install(std::move(t.value()), /*force=*/true);
  }

  void Install(RoutingTable t, bool force) EXCLUDES(mu) {
    MutexLock l(&mu);
    if (force || t.epoch >= table.epoch) table = std::move(t);
  }

  // A healthy connection to `address` (connecting if needed), chosen round-robin, and its
  // index in the pool. `index` >= 0 asks for that one.
  Result<std::shared_ptr<LtcConnection>> Connection(const std::string& address, int index,
                                                    Deadline deadline, int* chosen) EXCLUDES(mu) {
    const int n = std::max(1, options.connections_per_ltc);
    int i = 0;
    {
      MutexLock l(&mu);
      auto& pool = pools[address];
      pool.resize(static_cast<size_t>(n));
      i = index >= 0 ? index % n : static_cast<int>(round_robin++ % static_cast<uint64_t>(n));
      if (pool[i] != nullptr && pool[i]->healthy()) {
        if (chosen) *chosen = i;
        return pool[i];
      }
      if (index >= 0 && pool[i] != nullptr) {
        // A snapshot's connection is gone, and the snapshot with it.
        return Status::NetworkError("the connection holding the snapshot to LTC " + address +
                                    " failed");
      }
    }
    const Deadline connect_deadline =
        Deadline(std::min(deadline.when(), MonoNow() + options.connect_timeout));
    auto c = LtcConnection::Connect(address, connect_deadline, options.max_response_bytes,
                                    options.client_secret);
    if (!c.ok()) return c.status();
    // Learn the LTC's limits before anything is sent on the connection: a new connection may
    // reach a restarted LTC with other flags.
    auto [s, payload] = CallOnce(c.value().get(), ClientMsg::kDescribe, "", deadline);
    ltc::DescribeResponse d;
    if (s.ok()) s = ltc::DecodeDescribeResponse(payload, &d);
    if (!s.ok()) {
      c.value()->Close();
      return s.Prepend("describing LTC " + address);
    }
    MutexLock l(&mu);
    pools[address][i] = c.value();
    limits[address] = d.limits;
    if (chosen) *chosen = i;
    return c.value();
  }

  // A direct connection to `address` for the caller alone: an idle one, or a new one
  // (which describes its LTC first). Give it back with ReturnDirect. Unavailable when the
  // caller should use the pipelined connections instead: options.max_direct_per_ltc are
  // open to that LTC already, or connecting one failed less than kDirectRetryAfter ago (an
  // LTC at its --ltc_max_connections, or down: the pipelined path then reports why).
  Result<std::shared_ptr<LtcConnection>> CheckoutDirect(const std::string& address,
                                                        Deadline deadline) EXCLUDES(mu) {
    constexpr auto kDirectRetryAfter = std::chrono::seconds(1);
    {
      MutexLock l(&mu);
      DirectPool& pool = direct[address];
      while (!pool.idle.empty()) {
        std::shared_ptr<LtcConnection> c = std::move(pool.idle.back());
        pool.idle.pop_back();
        if (c->healthy()) return c;
        --pool.open;
      }
      if (pool.open >= std::max(0, options.max_direct_per_ltc) || MonoNow() < pool.retry_after) {
        return Status::Unavailable("no direct connection to LTC " + address);
      }
      ++pool.open;  // reserved for the one connected below
    }
    const Deadline connect_deadline =
        Deadline(std::min(deadline.when(), MonoNow() + options.connect_timeout));
    auto c = LtcConnection::ConnectDirect(address, connect_deadline, options.max_response_bytes,
                                          options.client_secret, options.spin, &spinning_calls);
    Status s = c.status();
    ltc::DescribeResponse d;
    if (s.ok()) {
      std::string payload;
      std::tie(s, payload) = CallOnce(c.value().get(), ClientMsg::kDescribe, "", deadline);
      if (s.ok()) s = ltc::DecodeDescribeResponse(payload, &d);
      if (!s.ok()) c.value()->Close();
    }
    MutexLock l(&mu);
    if (!s.ok()) {
      DirectPool& pool = direct[address];
      --pool.open;
      pool.retry_after = MonoNow() + kDirectRetryAfter;
      return s.Prepend("direct connection to LTC " + address);
    }
    limits[address] = d.limits;
    return c.value();
  }

  // Gives back a direct connection taken with CheckoutDirect: kept for the next blocking
  // call while healthy, else dropped.
  void ReturnDirect(const std::string& address, std::shared_ptr<LtcConnection> c) EXCLUDES(mu) {
    const bool keep = c->healthy();
    MutexLock l(&mu);
    DirectPool& pool = direct[address];
    if (keep) {
      pool.idle.push_back(std::move(c));
    } else {
      --pool.open;
    }
  }

  // Sends `op` on a direct connection and waits for its answer on this thread.
  void ExecuteDirect(const std::shared_ptr<Op>& op, const std::string& address, uint64_t epoch)
      EXCLUDES(mu) {
    auto conn = CheckoutDirect(address, op->deadline);
    if (!conn.ok()) {
      // Through the pipelined connections at once (they report an LTC that is down).
      op->direct = false;
      Execute(op);
      return;
    }
    const std::string payload = op->encode(epoch);
    if (op->request != nullptr) {
      Status refused = CheckLimits(address, *op->request, payload.size());
      if (!refused.ok()) {
        ReturnDirect(address, std::move(conn.value()));
        op->done(refused.Prepend(op->what), std::string());
        return;
      }
    }
    // Completed before Call returns (a direct connection), unless a concurrent Close fails
    // it from another thread: the waiter covers that without assuming it.
    auto answer = std::make_shared<Answer>();
    conn.value()->Call(op->type, payload, op->deadline,
                       [answer](const Status& s, std::string p) {
                         answer->Set({s, std::move(p)});
                       });
    auto [s, response] = answer->Take();
    ReturnDirect(address, std::move(conn.value()));
    op->direct = false;  // a retry goes through the pipelined connections
    if (s.ok()) {
      op->done(s, std::move(response));
    } else if (s.IsNetworkError() && !op->deadline.Expired()) {
      // E.g. an idle direct connection the LTC closed (restarted): again at once.
      Execute(op);
    } else {
      Retry(op, s);
    }
  }

  // InvalidArgument naming the limit and its flag when `request`, `payload_bytes` long once
  // encoded, is over the limits `address` reported; OK within them, or when none are known
  // (no connection to it yet: the LTC checks anyway).
  Status CheckLimits(const std::string& address, const ltc::ClientRequest& request,
                     size_t payload_bytes) const EXCLUDES(mu) {
    ltc::ClientLimits l;
    {
      MutexLock lock(&mu);
      auto it = limits.find(address);
      if (it == limits.end()) return Status::OK();
      l = it->second;
    }
    Status s = ltc::CheckClientLimits(request, l);
    const uint64_t request_bytes = wire::kHeaderBytes + payload_bytes;
    if (s.ok() && request_bytes > l.max_request_bytes) {
      // The LTC's own words (connection_listener.cc) for the same refusal.
      s = Status::InvalidArgument("request of " + std::to_string(request_bytes) +
                                  " bytes exceeds the limit of " +
                                  std::to_string(l.max_request_bytes) +
                                  " bytes (--ltc_max_request_mb)");
    }
    return s.Prepend("LTC " + address + " would refuse it");
  }

  void Execute(std::shared_ptr<Op> op) EXCLUDES(mu) {
    RoutingTable::Route route;
    uint64_t epoch = 0;
    bool found = false;
    {
      MutexLock l(&mu);
      epoch = table.epoch;
      const RoutingTable::Route* r =
          op->route_below ? table.FindBelow(op->route_key) : table.Find(op->route_key);
      if (r != nullptr) {
        route = *r;
        found = true;
      }
    }
    if (!found) {
      op->direct = false;
      Retry(op, Status::Unavailable("no LTC is known to serve the range holding the key "
                                    "(is an LTC down?)"));
      return;
    }
    if (op->direct) {
      ExecuteDirect(op, route.ltc_address, epoch);
      return;
    }
    auto conn = Connection(route.ltc_address, -1, op->deadline, nullptr);
    if (!conn.ok()) {
      Retry(op, conn.status());
      return;
    }
    const std::string payload = op->encode(epoch);
    if (op->request != nullptr) {
      Status refused = CheckLimits(route.ltc_address, *op->request, payload.size());
      if (!refused.ok()) {
        op->done(refused.Prepend(op->what), std::string());
        return;
      }
    }
    conn.value()->Call(op->type, payload, op->deadline,
                       [this, op](const Status& s, std::string payload) {
                         if (s.ok()) {
                           op->done(s, std::move(payload));
                         } else {
                           Retry(op, s);
                         }
                       });
  }

  // Splits `entries` by the current routing into *parts and readies every part: checks it
  // against its LTC's limits where they are known (no network), then connects to every LTC
  // concerned (learning the limits of new ones) and checks the rest. Sends nothing, so a
  // batch that fails here has applied nothing. Returns the first refusal (InvalidArgument
  // naming the flag), Unavailable for a key no LTC is known to serve, or the connection's
  // error.
  Status PrepareWrite(const std::vector<ltc::BatchEntry>& entries, Deadline deadline,
                      std::vector<WritePart>* parts) EXCLUDES(mu) {
    std::map<std::string, WritePart> by_start;
    {
      MutexLock l(&mu);
      for (const ltc::BatchEntry& e : entries) {
        const RoutingTable::Route* r = table.Find(e.key);
        if (r == nullptr) {
          return Status::Unavailable("no LTC is known to serve the range holding key '" +
                                     EscapeBytes(e.key) + "' (is an LTC down?)");
        }
        WritePart& part = by_start[r->range.keys.start];
        if (part.address.empty()) {
          part.range_id = r->range.id;
          part.address = r->ltc_address;
          part.request.type = ClientMsg::kWrite;
          part.request.write.epoch = table.epoch;
        }
        part.request.write.entries.push_back(e);
      }
    }
    parts->clear();
    for (auto& [start, part] : by_start) {
      part.payload = ltc::EncodeWriteRequest(part.request.write);
      NOVA_RETURN_NOT_OK_PREPEND(CheckLimits(part.address, part.request, part.payload.size()),
                                 part.Name());
      parts->push_back(std::move(part));
    }
    for (WritePart& part : *parts) {
      // One part: the caller waits for it alone, on a direct connection.
      part.direct = parts->size() == 1 && options.direct_calls;
      Result<std::shared_ptr<LtcConnection>> conn = Status::Unavailable("");
      if (part.direct) {
        conn = CheckoutDirect(part.address, deadline);
        part.direct = conn.ok();
      }
      if (!part.direct) conn = Connection(part.address, -1, deadline, nullptr);
      if (!conn.ok()) return conn.status().Prepend(part.Name());
      part.conn = std::move(conn.value());
      NOVA_RETURN_NOT_OK_PREPEND(CheckLimits(part.address, part.request, part.payload.size()),
                                 part.Name());
    }
    return Status::OK();
  }

  // Completes `op` with `s` unless it may be retried before its deadline.
  void Retry(const std::shared_ptr<Op>& op, const Status& s) EXCLUDES(retry_mu) {
    // A connection-level TimedOut means the LTC did not answer within the op's deadline.
    if (!RetryPolicy::Retryable(s) || op->deadline.Expired()) {
      Status final = s;
      if (RetryPolicy::Retryable(s) || s.IsTimedOut()) {
        final = s.Prepend(std::string(op->what) + " gave up at its deadline (" +
                          std::to_string(options.timeout.count()) + " ms)");
      }
      op->done(final, std::string());
      return;
    }
    op->last = s;
    if (!op->backoff) op->backoff.emplace(Policy());
    const MonoTime when = op->backoff->NextAttempt(op->deadline);
    MutexLock l(&retry_mu);
    if (stopping) {
      l.Unlock();
      op->done(Status::Aborted("client shutting down"), std::string());
      return;
    }
    retries.emplace(when, [this, op] {
      bool stop;
      {
        MutexLock rl(&retry_mu);
        stop = stopping;
      }
      if (stop) {
        op->done(Status::Aborted("client shutting down"), std::string());
        return;
      }
      Refresh();
      Execute(op);
    });
    retry_cv.NotifyAll();
  }

  // Starts a routed call with retries. `request` (optional) is checked against the limits
  // of the LTC before each send. `route_below` routes to the range holding the keys just
  // below `route_key` (reverse scans).
  // `direct`: the caller waits for the answer (see Op::direct).
  void Start(const char* what, ClientMsg type, std::string route_key,
             std::function<std::string(uint64_t)> encode, CallCallback done,
             std::shared_ptr<const ltc::ClientRequest> request = nullptr,
             bool route_below = false, bool direct = false) {
    auto op = std::make_shared<Op>();
    op->type = T(type);
    op->route_key = std::move(route_key);
    op->route_below = route_below;
    op->encode = std::move(encode);
    op->deadline = Deadline::After(options.timeout);
    op->what = what;
    op->done = std::move(done);
    op->request = std::move(request);
    op->direct = direct && options.direct_calls;
    Execute(std::move(op));
  }

  // The key operations; `direct` when the caller blocks on the answer.
  void StartGet(const std::string& key,
                std::function<void(Result<std::string>)> done, bool direct) {
    auto request = KeyOp(ClientMsg::kGet, key, "");
    Start(
        "Get", ClientMsg::kGet, key, EncodeKeyOp(request),
        [done = std::move(done)](const Status& s, std::string payload) {
          if (!s.ok()) return done(s);
          std::string v;
          Status d = ltc::DecodeBytes(payload, &v);
          if (!d.ok()) return done(d);
          done(std::move(v));
        },
        request, /*route_below=*/false, direct);
  }

  void StartWrite(ClientMsg type, const std::string& key,
                  const std::string& value, std::function<void(Status)> done, bool direct) {
    auto request = KeyOp(type, key, value);
    Start(
        type == ClientMsg::kPut ? "Put" : "Delete", type, key, EncodeKeyOp(request),
        [done = std::move(done)](const Status& s, std::string) { done(s); }, request,
        /*route_below=*/false, direct);
  }

  // One Scan page at `snap` (either direction), on the snapshot's connection, no retries.
  Status ScanAtSnapshot(const Snapshot& snap, const std::string& start, uint32_t count,
                        bool reverse, ltc::ScanResponse* out);

  // Blocking form of Start.
  std::pair<Status, std::string> Run(const char* what, ClientMsg type, std::string route_key,
                                     std::function<std::string(uint64_t)> encode,
                                     bool route_below = false) {
    std::promise<std::pair<Status, std::string>> p;
    auto f = p.get_future();
    Start(
        what, type, std::move(route_key), std::move(encode),
        [&p](const Status& s, std::string payload) { p.set_value({s, std::move(payload)}); },
        nullptr, route_below, /*direct=*/true);
    return f.get();
  }
};

NovaClient::NovaClient(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  impl_->retry_thread = std::thread([this] { impl_->RetryLoop(); });
}

NovaClient::~NovaClient() {
  {
    MutexLock l(&impl_->retry_mu);
    impl_->stopping = true;
  }
  impl_->retry_cv.NotifyAll();
  impl_->retry_thread.join();
  std::map<std::string, std::vector<std::shared_ptr<LtcConnection>>> pools;
  {
    MutexLock l(&impl_->mu);
    pools.swap(impl_->pools);
  }
  for (auto& [addr, pool] : pools) {
    for (auto& c : pool) {
      if (c) c->Close();
    }
  }
}

Status NovaClient::Init() {
  if (impl_->options.routing_source != nullptr) {
    impl_->source = impl_->options.routing_source;
  } else if (!impl_->options.ltcs.empty()) {
    impl_->own_source = std::make_unique<StaticRoutingSource>(
        impl_->options.ltcs, impl_->options.connect_timeout, impl_->options.client_secret);
    impl_->source = impl_->own_source.get();
  } else {
    return Status::InvalidArgument("no LTC addresses (--ltc=host:port,...) and no routing source");
  }
  auto t = impl_->source->Fetch();
  if (!t.ok()) return t.status().Prepend("fetching the range routing");
  impl_->Install(std::move(t.value()), true);
  return Status::OK();
}

void NovaClient::SetRouting(RoutingTable t) { impl_->Install(std::move(t), false); }

RoutingTable NovaClient::routing() const {
  MutexLock l(&impl_->mu);
  return impl_->table;
}

namespace {

// Runs `start` with a callback handing its result over and waits for it (at once when the
// call went over a direct connection).
template <typename T>
T Await(const std::function<void(std::function<void(T)>)>& start) {
  auto w = std::make_shared<Waiter<T>>();
  start([w](T r) { w->Set(std::move(r)); });
  return w->Take();
}

}  // namespace

void NovaClient::GetAsync(const std::string& key, std::function<void(Result<std::string>)> done) {
  impl_->StartGet(key, std::move(done), /*direct=*/false);
}

void NovaClient::PutAsync(const std::string& key, const std::string& value,
                          std::function<void(Status)> done) {
  impl_->StartWrite(ClientMsg::kPut, key, value, std::move(done), /*direct=*/false);
}

void NovaClient::DeleteAsync(const std::string& key, std::function<void(Status)> done) {
  impl_->StartWrite(ClientMsg::kDelete, key, "", std::move(done), /*direct=*/false);
}

std::future<Result<std::string>> NovaClient::GetFuture(const std::string& key) {
  auto p = std::make_shared<std::promise<Result<std::string>>>();
  auto f = p->get_future();
  GetAsync(key, [p](Result<std::string> r) { p->set_value(std::move(r)); });
  return f;
}

std::future<Status> NovaClient::PutFuture(const std::string& key, const std::string& value) {
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  PutAsync(key, value, [p](Status s) { p->set_value(std::move(s)); });
  return f;
}

// The blocking calls go over direct connections: the answer is read by this thread.
Result<std::string> NovaClient::Get(const std::string& key) {
  return Await<Result<std::string>>([&](std::function<void(Result<std::string>)> done) {
    impl_->StartGet(key, std::move(done), /*direct=*/true);
  });
}

Status NovaClient::Put(const std::string& key, const std::string& value) {
  return Await<Status>([&](std::function<void(Status)> done) {
    impl_->StartWrite(ClientMsg::kPut, key, value, std::move(done), /*direct=*/true);
  });
}

Status NovaClient::Delete(const std::string& key) {
  return Await<Status>([&](std::function<void(Status)> done) {
    impl_->StartWrite(ClientMsg::kDelete, key, "", std::move(done), /*direct=*/true);
  });
}

}  // namespace nova::client

namespace nova::client {

Status NovaClient::Write(const std::vector<ltc::BatchEntry>& batch) {
  if (batch.empty()) return Status::OK();
  const Deadline deadline = Deadline::After(impl_->options.timeout);
  Backoff backoff(impl_->Policy());
  // What is left to apply: the whole batch, then the entries of the parts that failed.
  const std::vector<ltc::BatchEntry>* todo = &batch;
  std::vector<ltc::BatchEntry> left;
  bool sent_any = false;  // a part was sent: it may have been applied, whatever its answer
  for (;;) {
    std::vector<WritePart> parts;
    Status last = impl_->PrepareWrite(*todo, deadline, &parts);
    if (!last.ok()) {
      for (WritePart& part : parts) {
        if (part.direct && part.conn != nullptr) {
          impl_->ReturnDirect(part.address, std::move(part.conn));
        }
      }
    }
    if (!last.ok() && !RetryPolicy::Retryable(last)) {
      return WithOutcome(last.Prepend("Write"), sent_any);
    }
    if (last.ok()) {
      // Every part may be sent: send them all, in parallel.
      std::vector<std::future<Status>> results;
      for (WritePart& part : parts) {
        auto p = std::make_shared<std::promise<Status>>();
        results.push_back(p->get_future());
        part.conn->Call(T(ClientMsg::kWrite), part.payload, deadline,
                        [p](const Status& s, std::string) { p->set_value(s); });
      }
      for (WritePart& part : parts) {
        if (part.direct) impl_->ReturnDirect(part.address, std::move(part.conn));
      }
      const bool sent_before = sent_any;
      sent_any = true;
      std::vector<ltc::BatchEntry> retry;
      for (size_t i = 0; i < parts.size(); ++i) {
        const Status st = results[i].get();
        if (st.ok()) continue;
        if (!RetryPolicy::Retryable(st)) {
          // An LTC's refusal applied nothing of its part; a timeout may have applied it.
          return WithOutcome(st.Prepend("Write: " + parts[i].Name()),
                             sent_before || parts.size() > 1 || st.IsTimedOut());
        }
        last = st.Prepend(parts[i].Name());
        for (auto& e : parts[i].request.write.entries) retry.push_back(std::move(e));
      }
      if (retry.empty()) return Status::OK();
      left = std::move(retry);
      todo = &left;
    }
    if (deadline.Expired()) {
      return WithOutcome(last.Prepend("Write gave up at its deadline (" +
                                      std::to_string(impl_->options.timeout.count()) + " ms)"),
                         sent_any);
    }
    // Back off (this is the calling thread, not a shared one), then re-route.
    std::this_thread::sleep_until(backoff.NextAttempt(deadline));
    impl_->Refresh();
  }
}

Result<ltc::ClientLimits> NovaClient::LimitsFor(const std::string& key) {
  const Deadline deadline = Deadline::After(impl_->options.timeout);
  const RoutingTable t = routing();
  const RoutingTable::Route* r = t.Find(key);
  if (r == nullptr) return Status::Unavailable("no LTC is known to serve the key's range");
  auto conn = impl_->Connection(r->ltc_address, -1, deadline, nullptr);
  if (!conn.ok()) return conn.status();
  MutexLock l(&impl_->mu);
  auto it = impl_->limits.find(r->ltc_address);
  if (it == impl_->limits.end()) {
    return Status::Unavailable("LTC " + r->ltc_address + " has not described itself");
  }
  return it->second;
}

Status NovaClient::Scan(const std::string& start, size_t limit,
                        std::vector<std::pair<std::string, std::string>>* out) {
  std::string pos = start;
  while (out->size() < limit) {
    const uint32_t count = static_cast<uint32_t>(std::min<size_t>(limit - out->size(), kScanPage));
    auto [s, payload] = impl_->Run("Scan", ClientMsg::kScan, pos, [&pos, count](uint64_t epoch) {
      return ltc::EncodeScanRequest(ltc::ScanRequest{epoch, pos, count, 0, false});
    });
    if (!s.ok()) return s;
    ltc::ScanResponse r;
    NOVA_RETURN_NOT_OK(ltc::DecodeScanResponse(payload, &r));
    for (auto& kv : r.pairs) out->push_back(std::move(kv));
    if (r.end_of_keys) break;
    if (r.next_start <= pos && r.pairs.empty()) {
      return Status::Corruption("Scan: the LTC did not advance past " + pos);
    }
    pos = std::move(r.next_start);
  }
  return Status::OK();
}

Status NovaClient::ScanReverse(const std::string& before, size_t limit,
                               std::vector<std::pair<std::string, std::string>>* out) {
  std::string pos = before;  // pairs below it; "" while at the end of the key space
  size_t added = 0;
  while (added < limit) {
    const uint32_t count = static_cast<uint32_t>(std::min<size_t>(limit - added, kScanPage));
    auto [s, payload] = impl_->Run(
        "ScanReverse", ClientMsg::kScan, pos,
        [&pos, count](uint64_t epoch) {
          return ltc::EncodeScanRequest(ltc::ScanRequest{epoch, pos, count, 0, false, true});
        },
        /*route_below=*/true);
    if (!s.ok()) return s;
    ltc::ScanResponse r;
    NOVA_RETURN_NOT_OK(ltc::DecodeScanResponse(payload, &r));
    added += r.pairs.size();
    for (auto& kv : r.pairs) out->push_back(std::move(kv));
    if (r.end_of_keys) break;
    // Each reply ends strictly below where it began (at a range start or its last key).
    if (r.next_start.empty() || (!pos.empty() && r.next_start >= pos)) {
      return Status::Corruption("ScanReverse: the LTC did not move below " + pos);
    }
    pos = std::move(r.next_start);
  }
  return Status::OK();
}

Result<uint64_t> NovaClient::Count(const std::string& start, const std::string& end) {
  std::string pos = start;
  uint64_t n = 0;
  for (;;) {
    if (!end.empty() && pos >= end) break;
    auto [s, payload] = impl_->Run("Count", ClientMsg::kScan, pos, [&pos](uint64_t epoch) {
      return ltc::EncodeScanRequest(ltc::ScanRequest{epoch, pos, kScanPage, 0, true});
    });
    if (!s.ok()) return s;
    ltc::ScanResponse r;
    NOVA_RETURN_NOT_OK(ltc::DecodeScanResponse(payload, &r));
    for (const auto& kv : r.pairs) {
      if (!end.empty() && kv.first >= end) return n;
      ++n;
    }
    if (r.end_of_keys) break;
    if (r.next_start <= pos && r.pairs.empty()) {
      return Status::Corruption("Count: the LTC did not advance past " + pos);
    }
    pos = std::move(r.next_start);
  }
  return n;
}

Result<std::string> NovaClient::Stats() {
  std::set<std::string> addrs(impl_->options.ltcs.begin(), impl_->options.ltcs.end());
  for (const auto& r : routing().routes) addrs.insert(r.ltc_address);
  std::string out;
  Status first;
  for (const std::string& a : addrs) {
    const Deadline deadline = Deadline::After(impl_->options.timeout);
    out += "== " + a + " ==\n";
    auto conn = impl_->Connection(a, -1, deadline, nullptr);
    std::pair<Status, std::string> r;
    if (conn.ok()) r = CallOnce(conn.value().get(), ClientMsg::kStats, "", deadline);
    Status s = conn.ok() ? r.first : conn.status();
    std::string text;
    if (s.ok()) s = ltc::DecodeBytes(r.second, &text);
    if (!s.ok()) {
      if (first.ok()) first = s.Prepend("Stats of " + a);
      out += "error: " + s.ToString() + "\n";
    } else {
      out += text;
    }
  }
  if (!first.ok() && out.find("error: ") != std::string::npos && addrs.size() == 1) return first;
  return out;
}

void NovaClient::CallLtc(const std::string& address, ClientMsg type, std::string payload,
                         Deadline deadline, std::function<void(Status, std::string)> done) {
  auto conn = impl_->Connection(address, -1, deadline, nullptr);
  if (!conn.ok()) return done(conn.status(), std::string());
  conn.value()->Call(T(type), payload, deadline,
                     [done = std::move(done)](const Status& s, std::string r) {
                       done(s, std::move(r));
                     });
}

void NovaClient::RefreshRouting() { impl_->Refresh(); }

const ClientOptions& NovaClient::options() const { return impl_->options; }

Result<NovaClient::Snapshot> NovaClient::GetSnapshot(const std::string& key) {
  return std::move(GetSnapshots({key}).front());
}

std::vector<Result<NovaClient::Snapshot>> NovaClient::GetSnapshots(
    const std::vector<std::string>& keys) {
  const Deadline deadline = Deadline::After(impl_->options.timeout);
  const RoutingTable t = routing();
  // Send every request first, then collect the answers: the LTCs work on them together.
  struct Call {
    Snapshot snap;
    Status error;  // the call could not be sent
    std::future<std::pair<Status, std::string>> reply;
  };
  std::vector<Call> calls(keys.size());
  std::map<std::string, Status> unreachable;  // by LTC address
  for (size_t i = 0; i < keys.size(); ++i) {
    Call& c = calls[i];
    const RoutingTable::Route* r = t.Find(keys[i]);
    if (r == nullptr) {
      c.error = Status::Unavailable("no LTC is known to serve the key's range");
      continue;
    }
    c.snap.ltc_address = r->ltc_address;
    // An LTC that could not be connected to fails its other ranges at once (an unreachable
    // host would cost connect_timeout per range).
    if (auto failed = unreachable.find(r->ltc_address); failed != unreachable.end()) {
      c.error = failed->second;
      continue;
    }
    auto conn = impl_->Connection(r->ltc_address, -1, deadline, nullptr);
    if (!conn.ok()) {
      c.error = conn.status();
      unreachable.emplace(r->ltc_address, conn.status());
      continue;
    }
    c.snap.connection = conn.value();
    auto p = std::make_shared<std::promise<std::pair<Status, std::string>>>();
    c.reply = p->get_future();
    conn.value()->Call(
        T(ClientMsg::kGetSnapshot),
        ltc::EncodeKeyRequest(ClientMsg::kGetSnapshot, ltc::KeyRequest{t.epoch, keys[i], "", 0}),
        deadline, [p](const Status& s, std::string r) { p->set_value({s, std::move(r)}); });
  }
  std::vector<Result<Snapshot>> out;
  out.reserve(calls.size());
  for (Call& c : calls) {
    if (!c.error.ok()) {
      out.emplace_back(c.error);
      continue;
    }
    auto [s, payload] = c.reply.get();
    if (s.ok()) s = ltc::DecodeU64(payload, &c.snap.id);
    if (!s.ok()) {
      out.emplace_back(s.Prepend("GetSnapshot"));
      continue;
    }
    out.emplace_back(std::move(c.snap));
  }
  return out;
}

namespace {

// The connection holding `snap`: the only one its id means anything on.
Result<std::shared_ptr<LtcConnection>> SnapshotConnection(const NovaClient::Snapshot& snap) {
  if (snap.connection == nullptr) {
    return Status::InvalidArgument("not a snapshot this client took");
  }
  if (!snap.connection->healthy()) {
    return Status::NetworkError("the connection holding the snapshot to LTC " +
                                snap.ltc_address + " failed");
  }
  return snap.connection;
}

}  // namespace

Result<std::string> NovaClient::GetAt(const Snapshot& snap, const std::string& key) {
  const Deadline deadline = Deadline::After(impl_->options.timeout);
  auto conn = SnapshotConnection(snap);
  if (!conn.ok()) return conn.status();
  ltc::ClientRequest request;
  request.type = ClientMsg::kGet;
  request.key = ltc::KeyRequest{0, key, "", snap.id};
  const std::string get = ltc::EncodeKeyRequest(ClientMsg::kGet, request.key);
  NOVA_RETURN_NOT_OK_PREPEND(impl_->CheckLimits(snap.ltc_address, request, get.size()),
                             "Get at a snapshot");
  auto [s, payload] = CallOnce(conn.value().get(), ClientMsg::kGet, get, deadline);
  if (!s.ok()) return s;
  std::string v;
  NOVA_RETURN_NOT_OK(ltc::DecodeBytes(payload, &v));
  return v;
}

Status NovaClient::Impl::ScanAtSnapshot(const Snapshot& snap, const std::string& start,
                                        uint32_t count, bool reverse, ltc::ScanResponse* out) {
  const Deadline deadline = Deadline::After(options.timeout);
  auto conn = SnapshotConnection(snap);
  if (!conn.ok()) return conn.status();
  // Epoch 0: a snapshot is bound to its connection and range, not to a routing epoch.
  auto [s, payload] = CallOnce(
      conn.value().get(), ClientMsg::kScan,
      ltc::EncodeScanRequest(ltc::ScanRequest{0, start, count, snap.id, false, reverse}),
      deadline);
  if (!s.ok()) return s;
  *out = ltc::ScanResponse();
  return ltc::DecodeScanResponse(payload, out);
}

Status NovaClient::ScanAt(const Snapshot& snap, const std::string& start, uint32_t count,
                          ltc::ScanResponse* out) {
  return impl_->ScanAtSnapshot(snap, start, count, /*reverse=*/false, out);
}

Status NovaClient::ScanReverseAt(const Snapshot& snap, const std::string& before, uint32_t count,
                                 ltc::ScanResponse* out) {
  return impl_->ScanAtSnapshot(snap, before, count, /*reverse=*/true, out);
}

Status NovaClient::ReleaseSnapshot(const Snapshot& snap) {
  const Deadline deadline = Deadline::After(impl_->options.timeout);
  auto conn = SnapshotConnection(snap);
  if (!conn.ok()) return conn.status();
  return CallOnce(conn.value().get(), ClientMsg::kReleaseSnapshot, ltc::EncodeU64(snap.id),
                  deadline).first;
}

void NovaClient::ReleaseSnapshotAsync(const Snapshot& snap) {
  const Deadline deadline = Deadline::After(impl_->options.timeout);
  auto conn = SnapshotConnection(snap);
  if (!conn.ok()) return;  // the connection, and the snapshot with it, is gone
  conn.value()->Call(T(ClientMsg::kReleaseSnapshot), ltc::EncodeU64(snap.id), deadline,
                     [](const Status&, std::string) {});
}

}  // namespace nova::client
