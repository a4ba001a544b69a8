// The exchange transport: RDMA semantics between Nova-LSM components.
//
// Components (LTC, LogC, StoC) talk through a Transport. It offers RDMA's verbs:
//  - two-sided Send: the payload is delivered to the peer's TransportHandler::OnMessage;
//  - one-sided Write into a peer's registered memory, optionally with a 32-bit immediate
//    that raises TransportHandler::OnWriteWithImm at the peer (like an RDMA receive
//    completion); without an immediate no code of the peer's application runs;
//  - one-sided Read from a peer's registered memory; no application code runs at the peer.
// Every one-sided op is checked at the target against the region's rkey, bounds and access
// flags; a bad op fails at the initiator with an error and never touches memory outside.
//
// Two backends implement it (see NewTransport): `tcp` (default, everywhere) and `verbs`
// (rdma-core RC queue pairs). Both pass the same conformance suite (transport_test.cc).
//
// Exchange (xchg) threads: a transport runs options.xchg_threads of them. Lane k of a peer is
// the connection (QP) between xchg thread k here and xchg thread k there. Operations posted on
// one lane are executed and completed in order, like an RC QP; different lanes are unordered.
// xchg threads only move bytes and raise completions: they never run storage or LSM work.
//
// Lifecycle (STYLE.md): constructor cannot fail, Init() (may fail), Start() (opens the
// network), Shutdown() (idempotent; fails outstanding operations with Aborted).
//
// Thread safety: all public methods are thread-safe. Handler methods and completion callbacks
// run on xchg threads: they must be short and must not block (hand real work to a pool).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace nova::transport {

// Access flags of a registered region (bitwise OR).
enum Access : uint32_t {
  kLocalOnly = 0,
  kRemoteRead = 1u << 0,   // peers may Read from it
  kRemoteWrite = 1u << 1,  // peers may Write into it
};

// Where a peer's registered memory is: what a one-sided op targets.
// Peers learn it from each other by Send (e.g. in a "region" reply).
struct RemoteAddr {
  uint64_t addr = 0;  // virtual address inside the peer's region
  uint32_t rkey = 0;
};

// A local registered region. Returned by RegisterMemory; valid until DeregisterMemory.
struct MemoryRegion {
  uint32_t id = 0;      // local handle, unique per transport
  uint32_t rkey = 0;    // what peers present to access it (0 for kLocalOnly)
  uint32_t lkey = 0;    // backend-specific local key (verbs); 0 for tcp
  char* base = nullptr;
  uint64_t length = 0;
  uint32_t access = kLocalOnly;

  // The address peers use for byte `offset` of this region.
  RemoteAddr Remote(uint64_t offset = 0) const {
    return RemoteAddr{reinterpret_cast<uint64_t>(base) + offset, rkey};
  }
  bool Contains(const char* p, uint64_t len) const {
    return p >= base && len <= length && static_cast<uint64_t>(p - base) <= length - len;
  }
};

// Identifies a peer for the life of this transport. The same remote node (by name) keeps
// its PeerId across reconnects.
using PeerId = uint64_t;
constexpr PeerId kInvalidPeer = 0;

struct PeerInfo {
  PeerId id = kInvalidPeer;
  std::string name;     // the peer's TransportOptions::node_name
  std::string address;  // the peer's listen address "host:port"
};

// Called once per operation that was posted successfully, on an xchg thread.
using Completion = std::function<void(const Status&)>;

// Receives what peers cause at this process. Must outlive the Transport.
// Methods must be short and must not block, nor call Connect/Disconnect/Shutdown.
// OnPeerUp runs on the thread that completed the connection (Connect()'s caller, the
// listener or the reconnect thread) before any message of that connection is delivered;
// the others run on xchg threads.
class TransportHandler {
 public:
  virtual ~TransportHandler() = default;
  // A peer finished connecting and authenticating (either direction).
  virtual void OnPeerUp(const PeerInfo& peer) { (void)peer; }
  // A peer's connection failed or was closed; its outstanding ops have failed.
  virtual void OnPeerDown(PeerId peer, const Status& why) {
    (void)peer;
    (void)why;
  }
  // A two-sided message arrived. `payload` may be moved from.
  virtual void OnMessage(PeerId peer, std::string& payload) = 0;
  // A peer's Write with an immediate was applied to our memory: `length` bytes ending the
  // write are visible before this is called.
  virtual void OnWriteWithImm(PeerId peer, uint32_t imm, uint64_t length) {
    (void)peer;
    (void)imm;
    (void)length;
  }
};

enum class Backend { kTcp, kVerbs };
const char* BackendName(Backend b);
// Parses "tcp" or "verbs".
Status ParseBackend(std::string_view name, Backend* out);

// Default bound on a two-sided message. Only a bound: no buffer of this size is ever made
// in advance (tcp reads a message into a buffer sized by its header, verbs gathers it from
// the fixed receive buffers), so a process holds a big message only while one is in flight.
// 256 MiB lets one message carry a whole LTC entry (a 64 MiB value and a 64 KiB key, the
// LTC's default limits, with room for operators raising them): a live migration copies a
// memtable entry in one kMigrateFetch response.
constexpr uint64_t kDefaultMaxMessageBytes = 256ull << 20;

struct TransportOptions {
  Backend backend = Backend::kTcp;
  // Unique name of this process in the cluster (e.g. "stoc-1"); sent to peers on connect.
  std::string node_name = "node";
  // Address to listen on. Port 0 picks a free port (see Transport::listen_address()).
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;
  // Number of exchange threads (= lanes per peer). Both ends must use the same number.
  int xchg_threads = 2;
  // Shared cluster secret: peers prove they know it (HMAC-SHA256 challenge-response) before
  // anything else is accepted. Must not be empty.
  std::string cluster_secret;
  // Largest two-sided message accepted (bigger ones are refused at the sender).
  uint64_t max_message_bytes = kDefaultMaxMessageBytes;
  // Largest single one-sided transfer.
  uint64_t max_transfer_bytes = 1ull << 30;
  // Connect() gives up after this long.
  int connect_timeout_ms = 5000;
  // After a connection made by Connect() fails, reconnect with exponential backoff between
  // these bounds. 0 disables reconnecting.
  int reconnect_initial_backoff_ms = 50;
  int reconnect_max_backoff_ms = 5000;
  // Kernel socket buffer size (tcp backend).
  int socket_buffer_bytes = 4 << 20;
};

struct TransportStats {
  uint64_t sends = 0, writes = 0, reads = 0;            // posted by us
  uint64_t bytes_sent = 0, bytes_written = 0, bytes_read = 0;
  uint64_t failed_ops = 0;            // our ops that completed with an error
  uint64_t rejected_remote_ops = 0;   // peers' one-sided ops we refused (rkey/bounds/access)
  uint64_t auth_failures = 0;         // connections refused for a bad or missing secret
  uint64_t peers_up = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Validates options and allocates resources. verbs: fails with Unavailable("no RDMA
  // device") when none is present.
  virtual Status Init() = 0;
  // Starts the xchg threads and the listener. REQUIRES: Init() succeeded.
  virtual Status Start() = 0;
  // Stops everything; outstanding ops complete with Aborted; peers see a peer-down.
  // Idempotent. Called by the destructor.
  virtual void Shutdown() = 0;

  // "host:port" this transport listens on. REQUIRES: Start() succeeded.
  virtual std::string listen_address() const = 0;
  virtual const TransportOptions& options() const = 0;

  // Connects to the transport listening at `address` ("host:port"), all lanes, and
  // authenticates. Returns the peer's id, or the error (refused, timed out, bad secret).
  // Connecting to an address already connected returns the existing id.
  virtual Result<PeerId> Connect(const std::string& address) = 0;
  // Closes the connection; outstanding ops fail; no reconnect.
  virtual void Disconnect(PeerId peer) = 0;
  virtual bool IsUp(PeerId peer) const = 0;
  virtual Result<PeerInfo> GetPeerInfo(PeerId peer) const = 0;

  // Registers [base, base+length) for use with one-sided ops. The memory stays owned by the
  // caller and must stay valid until DeregisterMemory returns.
  virtual Result<MemoryRegion> RegisterMemory(void* base, uint64_t length, uint32_t access) = 0;
  // Unregisters; waits for in-flight one-sided ops on it to finish. Later peer ops on it fail.
  virtual Status DeregisterMemory(const MemoryRegion& region) = 0;

  // lane < 0 picks a lane from the calling thread (a thread's ops stay in order).
  // Each returns OK if the op was posted (then `done` runs exactly once, later), or the
  // reason it was not (then `done` never runs): peer down, bad local buffer, too large,
  // shutting down.

  // Sends a copy of `msg`.
  virtual Status Send(PeerId peer, std::string_view msg, Completion done, int lane = -1) = 0;
  // Writes local.base[local_offset, +length) to the peer's `remote`. With `imm`, the peer's
  // handler sees OnWriteWithImm(imm, length) after the bytes are in place. The local bytes
  // must stay unchanged until `done` runs.
  virtual Status Write(PeerId peer, const MemoryRegion& local, uint64_t local_offset,
                       uint64_t length, RemoteAddr remote, std::optional<uint32_t> imm,
                       Completion done, int lane = -1) = 0;
  // Reads `length` bytes at the peer's `remote` into local.base[local_offset, +length).
  virtual Status Read(PeerId peer, RemoteAddr remote, uint64_t length, const MemoryRegion& local,
                      uint64_t local_offset, Completion done, int lane = -1) = 0;

  virtual TransportStats GetStats() const = 0;
};

// Creates the backend named by options.backend. `handler` must outlive the transport.
// Returns NotSupported if that backend was not compiled in.
Result<std::unique_ptr<Transport>> NewTransport(const TransportOptions& options,
                                                TransportHandler* handler);

// Picks the default lane for the calling thread: stable per thread. On a thread pinned
// with PinCurrentThreadToLane (a tcp xchg thread: its own lane) that lane, modulo `lanes`,
// so what an xchg thread posts (a reply served on it) needs no hand-off to another one.
int LaneForCurrentThread(int lanes);
void PinCurrentThreadToLane(int lane);

}  // namespace nova::transport
