// RequestMetrics: where the LTC's client requests spend their time (ltc_request_* on
// /metrics, and the block the kStats request, hence `nova_cli stats`, ends with; see
// docs/ltc_server.md "Where a request's time goes").
//
// Per request the server takes a few steady-clock readings (vDSO: no system call): when it
// hands the request to a worker, when serving starts, once the engine has answered, once the
// response is written. The StoC block reads and log appends inside the engine are the
// serving thread's own tallies (StocClient::ThreadReadNanos, LogClient::ThreadAppendNanos)
// taken around the request, so background flushes and compactions never count in them.
// Requests are classed as reads (Get, Scan), writes (Put, Delete, Write) and other (the
// rest; CompactRange, long by nature, is not recorded at all). The process's CPU time and
// context switches (RegisterProcessGauges, common/metrics.h) are registered too: the text
// divides them by the requests served. One request in kCpuSampleEvery on each serving thread
// also reads the thread's CPU clock around it (a system call, unlike the steady clock): the
// CPU the serving thread spent on it, without the background work the process figure
// includes (but also without other threads' work for it: the transport's, the LogCs').
//
// Thread safety: thread-safe (relaxed atomic counters; the text reads them one by one, so
// it may mix a request's figures in one counter and not yet in the next).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/metrics.h"

namespace nova::ltc {

enum class RequestClass : uint8_t { kRead = 0, kWrite = 1, kOther = 2 };
inline constexpr size_t kRequestClasses = 3;

// The class of a request of client message `type` (ClientMsg).
RequestClass ClassOfRequest(uint16_t type);

// One request in this many on each thread has its thread CPU time measured: the two
// clock_gettime(CLOCK_THREAD_CPUTIME_ID) system calls cost about a microsecond together.
inline constexpr uint32_t kCpuSampleEvery = 64;
// CPU time of the calling thread, nanoseconds (a system call).
uint64_t ThreadCpuNanos();

// One request's times, in nanoseconds.
struct RequestTimes {
  uint64_t wait_ns = 0;        // handed to a worker until it started (0: served inline)
  uint64_t engine_ns = 0;      // decoding and handling the request
  uint64_t stoc_read_ns = 0;   // of engine_ns: StoC block reads on the serving thread
  uint64_t log_append_ns = 0;  // of engine_ns: log appends on the serving thread
  uint64_t send_ns = 0;        // writing the response
  bool cpu_sampled = false;    // thread_cpu_ns was measured
  uint64_t thread_cpu_ns = 0;  // CPU of the serving thread from start to response written
};

class RequestMetrics {
 public:
  // Registers the ltc_request_* counters and the process gauges. `registry` must outlive
  // this.
  explicit RequestMetrics(MetricsRegistry* registry);
  RequestMetrics(const RequestMetrics&) = delete;
  RequestMetrics& operator=(const RequestMetrics&) = delete;

  // Counts one request served.
  void Record(RequestClass c, const RequestTimes& t);

  // The "where a request's time goes" lines of LTC `ltc_id` (docs/operations.md shows one):
  // averages per request since the process started, from the counters, `served_inline`
  // (ltc_client_served_inline_total) and the process's usage now. One line saying so when
  // no request was served yet.
  std::string BreakdownText(uint32_t ltc_id, uint64_t served_inline) const;

 private:
  // The counters of one class, ltc_request_<class>_*.
  struct PerClass {
    Counter* requests = nullptr;       // _total
    Counter* wait_us = nullptr;        // _wait_us_total
    Counter* engine_us = nullptr;      // _engine_us_total
    Counter* stoc_read_us = nullptr;   // _stoc_read_us_total
    Counter* log_append_us = nullptr;  // _log_append_us_total
    Counter* send_us = nullptr;        // _send_us_total
    Counter* cpu_sampled = nullptr;    // _cpu_sampled_total
    Counter* thread_cpu_us = nullptr;  // _thread_cpu_us_total (of the sampled ones)
  };

  // Constant after construction (the counters are the registry's).
  std::array<PerClass, kRequestClasses> classes_;
};

}  // namespace nova::ltc
