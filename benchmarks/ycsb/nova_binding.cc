#include "benchmarks/ycsb/nova_binding.h"

#include <utility>

#include "benchmarks/ycsb/embedded_options.h"
#include "benchmarks/ycsb/record_codec.h"
#include "client/cluster_uri.h"
#include "client/nova_client.h"
#include "common/secret_file.h"
#include "coordinator/zk_client.h"

namespace nova::ycsb {
namespace {

// One client thread's view: stateless apart from a reused buffer, all calls go to the
// shared client. Same record layout and Update semantics as EmbeddedDB (embedded_db.h).
class NovaDB final : public DB {
 public:
  // `client`, `options` and `log` must outlive this object (the binding owns them).
  NovaDB(client::NovaClient* client, const NovaBindingOptions* options, ErrorLog* log)
      : client_(client), options_(options), log_(log) {}

  ReturnCode Read(std::string_view, std::string_view key, const std::vector<std::string>* fields,
                  Record* result) override {
    Result<std::string> v = client_->Get(std::string(key));
    if (v.status().IsNotFound()) return ReturnCode::kNotFound;
    if (!v.ok()) return Fail("read", v.status());
    result->clear();
    if (!DecodeRecord(v.value(), fields, result)) {
      return Fail("read", Status::Corruption("malformed record"));
    }
    return ReturnCode::kOk;
  }

  ReturnCode Scan(std::string_view, std::string_view start_key, int count,
                  const std::vector<std::string>* fields, std::vector<Record>* result) override {
    result->clear();
    if (count <= 0) return ReturnCode::kOk;
    std::vector<std::pair<std::string, std::string>> pairs;
    Status s = client_->Scan(std::string(start_key), static_cast<size_t>(count), &pairs);
    if (!s.ok()) return Fail("scan", s);
    for (const auto& [k, v] : pairs) {
      Record r;
      if (!DecodeRecord(v, fields, &r)) return Fail("scan", Status::Corruption("malformed record"));
      result->push_back(std::move(r));
    }
    return ReturnCode::kOk;
  }

  ReturnCode Update(std::string_view, std::string_view key, const Record& values) override {
    if (static_cast<int64_t>(values.size()) >= options_->fieldcount) {
      return Put("update", key, values);  // every field replaced: no need to read
    }
    // Read-merge-write, not atomic against a concurrent update of the same key (as YCSB's
    // RocksDB binding and EmbeddedDB).
    Result<std::string> current = client_->Get(std::string(key));
    if (current.status().IsNotFound()) return ReturnCode::kNotFound;
    if (!current.ok()) return Fail("update", current.status());
    Record record;
    if (!DecodeRecord(current.value(), nullptr, &record)) {
      return Fail("update", Status::Corruption("malformed record"));
    }
    MergeRecord(values, &record);
    return Put("update", key, record);
  }

  ReturnCode Insert(std::string_view, std::string_view key, const Record& values) override {
    return Put("insert", key, values);
  }

  ReturnCode Delete(std::string_view, std::string_view key) override {
    Status s = client_->Delete(std::string(key));
    if (!s.ok()) return Fail("delete", s);
    return ReturnCode::kOk;
  }

 private:
  ReturnCode Put(const char* op, std::string_view key, const Record& record) {
    encoded_.clear();
    EncodeRecord(record, &encoded_);
    Status s = client_->Put(std::string(key), encoded_);
    if (!s.ok()) return Fail(op, s);
    return ReturnCode::kOk;
  }

  ReturnCode Fail(const char* op, const Status& s) {
    log_->Report(op, s.ToString());
    return ReturnCode::kError;
  }

  client::NovaClient* const client_;
  const NovaBindingOptions* const options_;
  ErrorLog* const log_;
  std::string encoded_;  // reused buffer for Put
};

class NovaBinding final : public Binding {
 public:
  NovaBinding(NovaBindingOptions options, std::unique_ptr<client::ClusterConnection> conn)
      : options_(std::move(options)), log_("nova"), conn_(std::move(conn)) {}

  Result<std::unique_ptr<DB>> NewDB() override {
    return std::unique_ptr<DB>(std::make_unique<NovaDB>(conn_->client.get(), &options_, &log_));
  }

 private:
  const NovaBindingOptions options_;
  ErrorLog log_;
  // The one client of all threads: NovaClient is thread-safe and pipelines their calls.
  const std::unique_ptr<client::ClusterConnection> conn_;
};

}  // namespace

Result<NovaBindingOptions> ParseNovaBindingOptions(const Properties& props) {
  NovaBindingOptions o;
  const std::string ltc = props.Get("nova.ltc");
  o.zk = props.Get("nova.zk");
  o.cluster = props.Get("nova.cluster");
  o.client_secret_file = props.Get("nova.client_secret_file");
  o.zk_auth_file = props.Get("nova.zk_auth_file");
  if (!ltc.empty() && !o.zk.empty()) {
    return Status::InvalidArgument(
        "-db nova: give either -p nova.ltc (static LTC list) or "
        "-p nova.zk with nova.cluster (ZooKeeper), not both");
  }
  if (!ltc.empty()) {
    auto ltcs = client::ParseAddressList(ltc, "property nova.ltc");
    if (!ltcs.ok()) return ltcs.status();
    o.ltcs = std::move(ltcs.value());
  } else if (o.zk.empty()) {
    return Status::InvalidArgument(
        "-db nova needs -p nova.ltc=HOST:PORT[,HOST:PORT] (the LTCs) or "
        "-p nova.zk=HOST:PORT (ZooKeeper) with -p nova.cluster=NAME");
  } else if (o.cluster.empty()) {
    return Status::InvalidArgument("-db nova with nova.zk needs -p nova.cluster=NAME");
  }
  Result<int64_t> timeout = props.GetInt("nova.timeout_ms", o.timeout.count());
  if (!timeout.ok()) return timeout.status();
  if (*timeout <= 0) return Status::InvalidArgument("property nova.timeout_ms: must be > 0");
  o.timeout = std::chrono::milliseconds(*timeout);
  Result<int64_t> conns = props.GetInt("nova.connections_per_ltc", o.connections_per_ltc);
  if (!conns.ok()) return conns.status();
  if (*conns <= 0 || *conns > kMaxConnectionsPerLtc) {
    return Status::InvalidArgument("property nova.connections_per_ltc: must be in 1.." +
                                   std::to_string(kMaxConnectionsPerLtc));
  }
  o.connections_per_ltc = static_cast<int>(*conns);
  const std::string direct = props.Get("nova.direct_calls", "true");
  if (direct != "true" && direct != "false") {
    return Status::InvalidArgument("property nova.direct_calls: must be true or false, got '" +
                                   direct + "'");
  }
  o.direct_calls = direct == "true";
  Result<int64_t> spin = props.GetInt("nova.spin_us", o.spin_us);
  if (!spin.ok()) return spin.status();
  if (*spin < 0 || *spin > 10000) {
    return Status::InvalidArgument("property nova.spin_us: must be in 0..10000");
  }
  o.spin_us = *spin;
  Result<int64_t> fieldcount = props.GetInt("fieldcount", o.fieldcount);
  if (!fieldcount.ok()) return fieldcount.status();
  o.fieldcount = *fieldcount;
  return o;
}

Result<std::unique_ptr<Binding>> OpenNovaBinding(const Properties& props) {
  Result<NovaBindingOptions> options = ParseNovaBindingOptions(props);
  if (!options.ok()) return options.status();
  client::ClusterLocator where;
  where.ltcs = options->ltcs;
  where.zk = options->zk;
  where.cluster = options->cluster;
  client::ClientOptions co;
  co.timeout = options->timeout;
  co.connections_per_ltc = options->connections_per_ltc;
  co.direct_calls = options->direct_calls;
  co.spin = std::chrono::microseconds(options->spin_us);
  if (!options->client_secret_file.empty()) {
    auto secret = ReadSecretFile(options->client_secret_file, "property nova.client_secret_file");
    if (!secret.ok()) return secret.status().Prepend("-db nova");
    co.client_secret = secret.value();
  }
  if (!options->zk_auth_file.empty()) {
    auto auth = coordinator::ReadZkAuthFile(options->zk_auth_file, "property nova.zk_auth_file");
    if (!auth.ok()) return auth.status().Prepend("-db nova");
    co.zk_auth = auth.value();
  }
  auto conn = client::ConnectToCluster(where, co);
  if (!conn.ok()) return conn.status().Prepend("-db nova");
  return std::unique_ptr<Binding>(
      std::make_unique<NovaBinding>(std::move(*options), std::move(conn.value())));
}

}  // namespace nova::ycsb
