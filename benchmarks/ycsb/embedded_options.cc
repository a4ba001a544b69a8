#include "benchmarks/ycsb/embedded_options.h"

#include <cstdio>
#include <filesystem>
#include <system_error>

namespace nova::ycsb {

namespace {

Status NonNegative(const std::string& name, int64_t v) {
  if (v < 0) return Status::InvalidArgument("property " + name + " must be >= 0");
  return Status::OK();
}

}  // namespace

Result<EmbeddedOptions> ParseEmbeddedOptions(const Properties& props, const std::string& prefix) {
  EmbeddedOptions o;
  o.dir = props.Get(prefix + ".dir");
  if (o.dir.empty()) {
    return Status::InvalidArgument("-db " + prefix + " needs -p " + prefix +
                                   ".dir=DIR (the database directory)");
  }
  auto get_int = [&](const char* suffix, int64_t* out) -> Status {
    const std::string name = prefix + suffix;
    Result<int64_t> v = props.GetInt(name, *out);
    if (!v.ok()) return v.status();
    *out = *v;
    return NonNegative(name, *out);
  };
  NOVA_RETURN_NOT_OK(get_int(".write_buffer_size_mb", &o.write_buffer_size_mb));
  NOVA_RETURN_NOT_OK(get_int(".cache_size_mb", &o.cache_size_mb));
  NOVA_RETURN_NOT_OK(get_int(".bloom_bits", &o.bloom_bits));
  Result<int64_t> fieldcount = props.GetInt("fieldcount", o.fieldcount);
  if (!fieldcount.ok()) return fieldcount.status();
  o.fieldcount = *fieldcount;
  const std::string compression = props.Get(prefix + ".compression", "snappy");
  if (compression == "none") {
    o.compression = false;
  } else if (compression != "snappy") {
    return Status::InvalidArgument("property " + prefix + ".compression=" + compression +
                                   ": expected snappy or none");
  }
  Result<bool> sync = props.GetBool(prefix + ".sync", false);
  if (!sync.ok()) return sync.status();
  o.sync = *sync;
  Result<bool> destroy = props.GetBool(prefix + ".destroy", false);
  if (!destroy.ok()) return destroy.status();
  o.destroy = *destroy;

  std::error_code ec;
  if (o.destroy) std::filesystem::remove_all(o.dir, ec);
  std::filesystem::create_directories(o.dir, ec);
  if (ec) return Status::IOError("cannot create " + o.dir + ": " + ec.message());
  return o;
}

void ErrorLog::Report(const std::string& op, const std::string& message) {
  const uint64_t n = count_.fetch_add(1, std::memory_order_relaxed);
  if (n < kMaxPrinted) {
    std::fprintf(stderr, "%s binding: %s failed: %s%s\n", binding_.c_str(), op.c_str(),
                 message.c_str(), n + 1 == kMaxPrinted ? " (further errors not printed)" : "");
  }
}

}  // namespace nova::ycsb
