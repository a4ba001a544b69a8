#include "common/transport/transport.h"

#include "common/transport/tcp_transport.h"
#ifdef NOVA_HAVE_VERBS
#include "common/transport/verbs_transport.h"
#endif

namespace nova::transport {

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kTcp: return "tcp";
    case Backend::kVerbs: return "verbs";
  }
  return "unknown";
}

Status ParseBackend(std::string_view name, Backend* out) {
  if (name == "tcp") {
    *out = Backend::kTcp;
  } else if (name == "verbs") {
    *out = Backend::kVerbs;
  } else {
    return Status::InvalidArgument("unknown transport '" + std::string(name) +
                                   "': expected tcp or verbs");
  }
  return Status::OK();
}

Result<std::unique_ptr<Transport>> NewTransport(const TransportOptions& options,
                                                TransportHandler* handler) {
  switch (options.backend) {
    case Backend::kTcp:
      return std::unique_ptr<Transport>(new TcpTransport(options, handler));
    case Backend::kVerbs:
#ifdef NOVA_HAVE_VERBS
      return NewVerbsTransport(options, handler);
#else
      return Status::NotSupported("this build has no verbs backend (libibverbs not found)");
#endif
  }
  return Status::InvalidArgument("unknown transport backend");
}

namespace {
thread_local int pinned_lane = -1;
}  // namespace

void PinCurrentThreadToLane(int lane) { pinned_lane = lane; }

int LaneForCurrentThread(int lanes) {
  if (pinned_lane >= 0) return lanes <= 0 ? 0 : pinned_lane % lanes;
  // Threads are numbered on first use, so a thread's ops stay on one lane (in order) and
  // threads spread evenly over the lanes.
  static std::atomic<int> next_thread{0};
  thread_local int thread_number = next_thread.fetch_add(1, std::memory_order_relaxed);
  return lanes <= 0 ? 0 : thread_number % lanes;
}

}  // namespace nova::transport
