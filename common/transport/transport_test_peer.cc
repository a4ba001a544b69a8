// A second process for the transport conformance suite (transport_test.cc).
//
//   transport_test_peer <tcp|verbs> <secret> <xchg_threads> <region_bytes>
//
// Listens on 127.0.0.1 (ephemeral port) and prints "LISTEN <address>" on stdout. Registers
// one region of region_bytes (remote read+write). On every peer connection it sends
// "REGION <addr> <rkey> <length>". It echoes every message back with the prefix "ECHO ",
// and answers every write-with-immediate with "IMM <imm> <length> <crc32c of the region's
// first <length> bytes>". Runs until killed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/crc32c.h"
#include "common/transport/transport.h"

namespace {

using namespace nova;
using namespace nova::transport;

class PeerHandler : public TransportHandler {
 public:
  void OnPeerUp(const PeerInfo& peer) override {
    std::string msg = "REGION " + std::to_string(region.Remote().addr) + " " +
                      std::to_string(region.rkey) + " " + std::to_string(region.length);
    transport->Send(peer.id, msg, [](const Status&) {}).IgnoreError();
  }
  void OnMessage(PeerId peer, std::string& payload) override {
    transport->Send(peer, "ECHO " + payload, [](const Status&) {}).IgnoreError();
  }
  void OnWriteWithImm(PeerId peer, uint32_t imm, uint64_t length) override {
    uint32_t crc = crc32c::Value(region.base, length);
    std::string msg = "IMM " + std::to_string(imm) + " " + std::to_string(length) + " " +
                      std::to_string(crc);
    transport->Send(peer, msg, [](const Status&) {}).IgnoreError();
  }

  Transport* transport = nullptr;
  MemoryRegion region;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s <tcp|verbs> <secret> <xchg_threads> <region_bytes>\n", argv[0]);
    return 2;
  }
  TransportOptions opts;
  if (!ParseBackend(argv[1], &opts.backend).ok()) return 2;
  opts.cluster_secret = argv[2];
  opts.xchg_threads = std::atoi(argv[3]);
  opts.node_name = "test-peer-" + std::to_string(::getpid());
  const uint64_t bytes = std::strtoull(argv[4], nullptr, 10);

  PeerHandler handler;
  auto t = NewTransport(opts, &handler);
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Transport> transport = std::move(t.value());
  handler.transport = transport.get();
  std::unique_ptr<char[]> mem(new char[bytes]());
  Status s = transport->Init();
  if (s.ok()) {
    auto r = transport->RegisterMemory(mem.get(), bytes, kRemoteRead | kRemoteWrite);
    if (r.ok()) handler.region = r.value();
    s = r.status();
  }
  if (s.ok()) s = transport->Start();
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("LISTEN %s\n", transport->listen_address().c_str());
  std::fflush(stdout);
  while (true) ::pause();
}
