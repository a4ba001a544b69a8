#include "ltc/server/request_metrics.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "ltc/protocol/client_protocol.h"

namespace nova::ltc {
namespace {

struct ClassNames {
  const char* metric;  // in ltc_request_<metric>_*
  const char* text;    // in the breakdown
  const char* help;    // starts the metrics' help
};
constexpr std::array<ClassNames, kRequestClasses> kClassNames{{
    {"read", "reads (get, scan)", "Get and Scan requests"},
    {"write", "writes (put, delete, write)", "Put, Delete and Write requests"},
    {"other", "other", "Other requests (CompactRange not counted)"},
}};

// Nanoseconds to the nearest microsecond: no bias over many requests.
uint64_t Micros(uint64_t ns) { return (ns + 500) / 1000; }

// The figures of one class, or of all added up.
struct Totals {
  uint64_t requests = 0, wait_us = 0, engine_us = 0, stoc_read_us = 0, log_append_us = 0,
           send_us = 0, cpu_sampled = 0, thread_cpu_us = 0;

  void Add(const Totals& o) {
    requests += o.requests;
    wait_us += o.wait_us;
    engine_us += o.engine_us;
    stoc_read_us += o.stoc_read_us;
    log_append_us += o.log_append_us;
    send_us += o.send_us;
    cpu_sampled += o.cpu_sampled;
    thread_cpu_us += o.thread_cpu_us;
  }
};

// printf into a string (the lines here are short: longer ones are cut).
__attribute__((format(printf, 1, 2))) std::string Format(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  return buf;
}

// "wall W us: waiting for a worker ..., engine E (StoC reads S, log appends L), writing the
// response R[; serving thread's cpu C (N sampled)]": averages per request of `t`.
std::string WallText(const Totals& t) {
  const double n = static_cast<double>(t.requests);
  const auto avg = [n](uint64_t us) { return static_cast<double>(us) / n; };
  std::string out =
      Format("wall %.1f us: waiting for a worker %.1f, engine %.1f (StoC reads %.1f, log "
             "appends %.1f), writing the response %.1f",
             avg(t.wait_us + t.engine_us + t.send_us), avg(t.wait_us), avg(t.engine_us),
             avg(t.stoc_read_us), avg(t.log_append_us), avg(t.send_us));
  if (t.cpu_sampled > 0) {
    out += Format("; serving thread's cpu %.1f us (%llu sampled)",
                  static_cast<double>(t.thread_cpu_us) / static_cast<double>(t.cpu_sampled),
                  static_cast<unsigned long long>(t.cpu_sampled));
  }
  return out;
}

}  // namespace

RequestClass ClassOfRequest(uint16_t type) {
  switch (static_cast<ClientMsg>(type)) {
    case ClientMsg::kGet:
    case ClientMsg::kScan:
      return RequestClass::kRead;
    case ClientMsg::kPut:
    case ClientMsg::kDelete:
    case ClientMsg::kWrite:
      return RequestClass::kWrite;
    default:
      return RequestClass::kOther;
  }
}

uint64_t ThreadCpuNanos() {
  struct timespec ts {};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

RequestMetrics::RequestMetrics(MetricsRegistry* registry) {
  for (size_t i = 0; i < kRequestClasses; ++i) {
    const std::string p = std::string("ltc_request_") + kClassNames[i].metric;
    const std::string of = std::string(kClassNames[i].help) + ": ";
    PerClass& c = classes_[i];
    c.requests = registry->GetCounter(p + "_total", of + "served");
    c.wait_us = registry->GetCounter(
        p + "_wait_us_total",
        of + "microseconds waiting for a worker (none when served on the connection's reader)");
    c.engine_us = registry->GetCounter(p + "_engine_us_total",
                                       of + "microseconds decoding, routing and handling");
    c.stoc_read_us = registry->GetCounter(
        p + "_stoc_read_us_total", of + "microseconds in StoC block reads while handling");
    c.log_append_us = registry->GetCounter(
        p + "_log_append_us_total", of + "microseconds in log appends while handling");
    c.send_us = registry->GetCounter(p + "_send_us_total",
                                     of + "microseconds encoding and writing the response");
    c.cpu_sampled = registry->GetCounter(
        p + "_cpu_sampled_total",
        of + "served with their serving thread's CPU time measured (one in 64 per thread)");
    c.thread_cpu_us = registry->GetCounter(
        p + "_thread_cpu_us_total", of + "microseconds of CPU time of the serving thread, of "
                                         "the sampled ones");
  }
  RegisterProcessGauges(registry);
}

void RequestMetrics::Record(RequestClass c, const RequestTimes& t) {
  const PerClass& m = classes_[static_cast<size_t>(c)];
  m.requests->Increment();
  if (t.wait_ns != 0) m.wait_us->Increment(Micros(t.wait_ns));
  m.engine_us->Increment(Micros(t.engine_ns));
  if (t.stoc_read_ns != 0) m.stoc_read_us->Increment(Micros(t.stoc_read_ns));
  if (t.log_append_ns != 0) m.log_append_us->Increment(Micros(t.log_append_ns));
  m.send_us->Increment(Micros(t.send_ns));
  if (t.cpu_sampled) {
    m.cpu_sampled->Increment();
    m.thread_cpu_us->Increment(Micros(t.thread_cpu_ns));
  }
}

std::string RequestMetrics::BreakdownText(uint32_t ltc_id, uint64_t served_inline) const {
  std::array<Totals, kRequestClasses> per;
  Totals all;
  for (size_t i = 0; i < kRequestClasses; ++i) {
    const PerClass& c = classes_[i];
    Totals& t = per[i];
    t = {c.requests->value(),     c.wait_us->value(),       c.engine_us->value(),
         c.stoc_read_us->value(), c.log_append_us->value(), c.send_us->value(),
         c.cpu_sampled->value(),  c.thread_cpu_us->value()};
    all.Add(t);
  }
  const std::string head = "ltc " + std::to_string(ltc_id) + " time per request: ";
  if (all.requests == 0) return head + "no request served yet\n";
  // Counted at dispatch, while the others are counted once answered: clamp.
  const uint64_t inline_served = std::min(served_inline, all.requests);
  const uint64_t by_workers = all.requests - inline_served;
  std::string out = head + std::to_string(all.requests) + " served (" +
                    std::to_string(inline_served) + " on their connection's reader, " +
                    std::to_string(by_workers) + " by workers";
  if (by_workers > 0) {
    out += Format(" after waiting %.1f us on average",
                  static_cast<double>(all.wait_us) / static_cast<double>(by_workers));
  }
  out += ")\n";
  const ProcessUsage u = ReadProcessUsage();
  const double n = static_cast<double>(all.requests);
  out += Format("  cpu %.1f us (user %.1f, system %.1f), %.2f context switches (%.2f voluntary, "
                "%.2f involuntary): the whole process since it started / requests served, "
                "background flushes and compactions included\n",
                (u.user_seconds + u.system_seconds) * 1e6 / n, u.user_seconds * 1e6 / n,
                u.system_seconds * 1e6 / n,
                static_cast<double>(u.voluntary_switches + u.involuntary_switches) / n,
                static_cast<double>(u.voluntary_switches) / n,
                static_cast<double>(u.involuntary_switches) / n);
  out += "  " + WallText(all) + "\n";
  for (size_t i = 0; i < kRequestClasses; ++i) {
    if (per[i].requests == 0) continue;
    out += "  " + std::to_string(per[i].requests) + " " + kClassNames[i].text + ": " +
           WallText(per[i]) + "\n";
  }
  return out;
}

}  // namespace nova::ltc
