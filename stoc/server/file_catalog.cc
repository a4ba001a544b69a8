#include "stoc/server/file_catalog.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <utility>

#include <glog/logging.h>

#include "common/coding.h"
#include "common/crc32c.h"

namespace nova::stoc {

namespace {

// Record types. DO NOT CHANGE: persisted.
enum RecordType : uint8_t {
  kCreate = 1,
  kDelete = 2,
  kNextId = 3,
  kFence = 4,
};

constexpr char kCatalogFileName[] = "CATALOG";
constexpr char kTempFileName[] = "CATALOG.tmp";

// masked crc u32 + payload length u32 + type u8. DO NOT CHANGE: persisted.
constexpr size_t kRecordHeaderBytes = 4 + 4 + 1;
// The CRC covers the record from its type byte on.
constexpr size_t kTypeOffset = 4 + 4;
// The largest record is a kCreate: id (8) + kind (1) + varint length (2) + 255-byte name.
// A longer length field can only be damage.
constexpr uint32_t kMaxPayloadBytes = 512;
// Ids run from 1 to kMaxFileId; next_id_ may reach kMaxFileId + 1 (then AddFile refuses).
constexpr uint64_t kMaxFileId = std::numeric_limits<uint64_t>::max() - 1;
constexpr mode_t kFileMode = 0644;

std::string EncodeRecord(uint8_t type, std::string_view payload) {
  std::string rec(kRecordHeaderBytes, '\0');
  rec[kTypeOffset] = static_cast<char>(type);
  rec.append(payload.data(), payload.size());
  const uint32_t crc = crc32c::Value(rec.data() + kTypeOffset, rec.size() - kTypeOffset);
  EncodeFixed32(rec.data(), crc32c::Mask(crc));
  EncodeFixed32(rec.data() + 4, static_cast<uint32_t>(payload.size()));
  return rec;
}

std::string CreatePayload(uint64_t file_id, FileKind kind, std::string_view name) {
  std::string payload;
  PutFixed64(&payload, file_id);
  payload.push_back(static_cast<char>(kind));
  PutLengthPrefixed(&payload, name);
  return payload;
}

std::string IdPayload(uint64_t id) {
  std::string payload;
  PutFixed64(&payload, id);
  return payload;
}

std::string FencePayload(uint32_t range_id, uint64_t epoch) {
  std::string payload;
  PutFixed32(&payload, range_id);
  PutFixed64(&payload, epoch);
  return payload;
}

bool ValidKind(uint8_t kind) {
  return kind == static_cast<uint8_t>(FileKind::kMemory) ||
         kind == static_cast<uint8_t>(FileKind::kDisk);
}

bool OnlyZeros(std::string_view s) { return s.find_first_not_of('\0') == std::string_view::npos; }

Status WriteFully(int fd, std::string_view data, uint64_t offset, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write " + path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status::OK();
}

Status ReadWholeFile(int fd, const std::string& path, std::string* out) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno("stat " + path, errno);
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t n = ::pread(fd, out->data() + done, out->size() - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read " + path, errno);
    }
    if (n == 0) break;  // shrank under us; replay what is there
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  return Status::OK();
}

Status SyncFile(int fd, const std::string& path) {
  if (::fdatasync(fd) != 0) return Status::FromErrno("fdatasync " + path, errno);
  return Status::OK();
}

// Makes a create, rename or delete of an entry of `dir` durable.
Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open directory " + dir, errno);
  Status s;
  if (::fsync(fd) != 0) s = Status::FromErrno("fsync directory " + dir, errno);
  ::close(fd);
  return s;
}

}  // namespace

FileCatalog::FileCatalog(std::string dir, const FileCatalogOptions& options)
    : dir_(std::move(dir)), options_(options) {}

FileCatalog::~FileCatalog() {
  if (fd_ >= 0) ::close(fd_);
}

std::string FileCatalog::CatalogPath() const { return dir_ + "/" + kCatalogFileName; }
std::string FileCatalog::TempPath() const { return dir_ + "/" + kTempFileName; }

Result<std::unique_ptr<FileCatalog>> FileCatalog::Open(const std::string& dir,
                                                        const FileCatalogOptions& options) {
  std::unique_ptr<FileCatalog> catalog(new FileCatalog(dir, options));
  NOVA_RETURN_NOT_OK(catalog->Recover());
  return catalog;
}

Status FileCatalog::Recover() {
  MutexLock lock(&mu_);
  std::error_code ec;
  const bool created_dir = std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::IOError("create directory " + dir_ + ": " + ec.message());
  if (created_dir) {
    // So the directory itself survives a crash (its parent's entry for it).
    std::filesystem::path path = std::filesystem::absolute(dir_);
    if (!path.has_filename()) path = path.parent_path();  // "a/b/" names b, not a file in b
    NOVA_RETURN_NOT_OK(SyncDir(path.parent_path().string()));
  }

  // A leftover CATALOG.tmp is an unfinished rewrite: the rename never happened, so
  // CATALOG is the complete log.
  const std::string tmp = TempPath();
  if (::unlink(tmp.c_str()) == 0) {
    LOG(WARNING) << "removed unfinished catalog rewrite " << tmp;
  } else if (errno != ENOENT) {
    return Status::FromErrno("remove " + tmp, errno);
  }

  const std::string path = CatalogPath();
  struct stat st;
  const bool existed = ::stat(path.c_str(), &st) == 0;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, kFileMode);
  if (fd_ < 0) return Status::FromErrno("open " + path, errno);
  if (!existed) NOVA_RETURN_NOT_OK(SyncDir(dir_));

  std::string log;
  NOVA_RETURN_NOT_OK(ReadWholeFile(fd_, path, &log));
  uint64_t valid_length = 0;
  NOVA_RETURN_NOT_OK_PREPEND(Replay(log, &valid_length), path);
  if (valid_length < log.size()) {
    LOG(WARNING) << path << ": truncating a torn tail of " << (log.size() - valid_length)
                 << " bytes at offset " << valid_length
                 << " (an append interrupted by a crash; it was never acknowledged)";
    if (::ftruncate(fd_, static_cast<off_t>(valid_length)) != 0) {
      return Status::FromErrno("truncate " + path, errno);
    }
    NOVA_RETURN_NOT_OK(SyncFile(fd_, path));
  }
  log_size_ = valid_length;
  return MaybeRewrite();
}

Status FileCatalog::Replay(std::string_view log, uint64_t* valid_length) {
  size_t off = 0;
  while (off < log.size()) {
    auto at = [off] { return "record at offset " + std::to_string(off); };
    const size_t remaining = log.size() - off;
    if (remaining < kRecordHeaderBytes) break;  // torn: incomplete header
    const char* p = log.data() + off;
    const uint32_t masked_crc = DecodeFixed32(p);
    const uint32_t length = DecodeFixed32(p + 4);
    if (length > kMaxPayloadBytes) {
      // A torn append leaves a prefix of a real header, whose length is always small, so
      // this header is damage and where its record ends is unknown. Only if nothing but
      // zeros follows it is there certainly nothing after it to lose.
      if (OnlyZeros(log.substr(off + kRecordHeaderBytes))) break;
      return Status::Corruption(at() + ": payload length " + std::to_string(length) +
                                " exceeds " + std::to_string(kMaxPayloadBytes));
    }
    const size_t end = off + kRecordHeaderBytes + length;
    if (end > log.size()) break;  // torn: incomplete record
    const std::string_view covered = log.substr(off + kTypeOffset, end - off - kTypeOffset);
    if (crc32c::Unmask(masked_crc) != crc32c::Value(covered)) {
      // Rules 1 and 2 of the header: torn only if nothing real can follow.
      if (OnlyZeros(log.substr(end))) break;
      return Status::Corruption(at() + ": checksum mismatch, followed by " +
                                std::to_string(log.size() - end) + " more bytes");
    }
    NOVA_RETURN_NOT_OK_PREPEND(
        ApplyRecord(static_cast<uint8_t>(covered[0]), covered.substr(1)), at());
    ++log_records_;
    off = end;
  }
  *valid_length = off;
  return Status::OK();
}

Status FileCatalog::ApplyRecord(uint8_t type, std::string_view payload) {
  switch (type) {
    case kCreate: {
      uint64_t id = 0;
      std::string_view name;
      if (!GetFixed64(&payload, &id) || payload.empty()) {
        return Status::Corruption("truncated create record");
      }
      const uint8_t kind = static_cast<uint8_t>(payload[0]);
      payload.remove_prefix(1);
      if (!GetLengthPrefixed(&payload, &name) || !payload.empty()) {
        return Status::Corruption("malformed create record");
      }
      if (!ValidKind(kind)) return Status::Corruption("unknown file kind " + std::to_string(kind));
      Status name_ok = ValidateFileName(name);
      if (!name_ok.ok()) return Status::Corruption(name_ok.message());
      if (id == 0 || id > kMaxFileId || id < next_id_) {
        return Status::Corruption("file id " + std::to_string(id) +
                                  " is invalid or reused (next id " + std::to_string(next_id_) +
                                  ")");
      }
      if (by_name_.count(name) != 0) {
        return Status::Corruption("file name " + std::string(name) + " is already live");
      }
      by_id_[id] = FileEntry{id, static_cast<FileKind>(kind), std::string(name)};
      by_name_.emplace(std::string(name), id);
      next_id_ = id + 1;
      return Status::OK();
    }
    case kDelete: {
      uint64_t id = 0;
      if (!GetFixed64(&payload, &id) || !payload.empty()) {
        return Status::Corruption("malformed delete record");
      }
      auto it = by_id_.find(id);
      if (it == by_id_.end()) {
        return Status::Corruption("delete of unknown file id " + std::to_string(id));
      }
      by_name_.erase(it->second.name);
      by_id_.erase(it);
      return Status::OK();
    }
    case kNextId: {
      uint64_t next = 0;
      if (!GetFixed64(&payload, &next) || !payload.empty()) {
        return Status::Corruption("malformed next-id record");
      }
      if (next < next_id_ || next > kMaxFileId + 1) {
        return Status::Corruption("next id " + std::to_string(next) + " goes back from " +
                                  std::to_string(next_id_) + " or is out of range");
      }
      next_id_ = next;
      return Status::OK();
    }
    case kFence: {
      uint32_t range = 0;
      uint64_t epoch = 0;
      if (!GetFixed32(&payload, &range) || !GetFixed64(&payload, &epoch) || !payload.empty()) {
        return Status::Corruption("malformed fence record");
      }
      auto it = fences_.find(range);
      if (epoch == 0 || (it != fences_.end() && epoch < it->second)) {
        return Status::Corruption("fence of range " + std::to_string(range) + " at epoch " +
                                  std::to_string(epoch) + " goes back");
      }
      fences_[range] = epoch;
      return Status::OK();
    }
    default:
      return Status::Corruption("unknown record type " + std::to_string(type));
  }
}

Status FileCatalog::AppendRecord(uint8_t type, std::string_view payload) {
  const std::string rec = EncodeRecord(type, payload);
  const std::string path = CatalogPath();
  Status s = WriteFully(fd_, rec, log_size_, path);
  if (s.ok()) s = SyncFile(fd_, path);
  if (!s.ok()) {
    // Part of the record may be on disk and a failed fdatasync leaves the page cache in an
    // unknown state: appending after it could bury a bad record mid-log.
    error_ = s.Prepend("catalog refuses mutations after a failed append");
    LOG(ERROR) << error_.ToString();
    return error_;
  }
  log_size_ += rec.size();
  ++log_records_;
  return Status::OK();
}

Status FileCatalog::MaybeRewrite() {
  const uint64_t live = by_id_.size() + fences_.size();
  const uint64_t threshold = std::max<uint64_t>(options_.min_rewrite_records, 2 * live);
  if (log_records_ <= threshold) return Status::OK();
  Status s = Rewrite();
  if (!s.ok() && error_.ok()) {
    // Failed before the rename: the old log is intact and keeps being appended to.
    LOG(WARNING) << CatalogPath() << ": rewrite failed, keeping the old log: " << s.ToString();
  }
  return error_;
}

Status FileCatalog::Rewrite() {
  std::string contents;
  for (const auto& [id, entry] : by_id_) {
    contents += EncodeRecord(kCreate, CreatePayload(id, entry.kind, entry.name));
  }
  // Fences are live state too: a rewrite that dropped one would let a fenced-off owner
  // write again after the next restart.
  for (const auto& [range, epoch] : fences_) {
    contents += EncodeRecord(kFence, FencePayload(range, epoch));
  }
  contents += EncodeRecord(kNextId, IdPayload(next_id_));

  const std::string tmp = TempPath();
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode);
  if (fd < 0) return Status::FromErrno("open " + tmp, errno);
  Status s = WriteFully(fd, contents, 0, tmp);
  if (s.ok()) s = SyncFile(fd, tmp);
  if (s.ok() && ::rename(tmp.c_str(), CatalogPath().c_str()) != 0) {
    s = Status::FromErrno("rename " + tmp, errno);
  }
  if (!s.ok()) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }

  // The new log is CATALOG now; the old inode is gone.
  const uint64_t old_records = log_records_;
  ::close(fd_);
  fd_ = fd;
  log_size_ = contents.size();
  log_records_ = by_id_.size() + fences_.size() + 1;
  s = SyncDir(dir_);
  if (!s.ok()) {
    // The rename may not be durable: after a crash the old log could come back, without
    // anything appended from now on.
    error_ = s.Prepend("catalog refuses mutations after an unsynced rewrite");
    LOG(ERROR) << error_.ToString();
    return error_;
  }
  LOG(INFO) << CatalogPath() << ": rewrote " << old_records << " records as " << log_records_;
  return Status::OK();
}

Result<uint64_t> FileCatalog::AddFile(std::string_view name, FileKind kind) {
  NOVA_RETURN_NOT_OK(ValidateFileName(name));
  if (!ValidKind(static_cast<uint8_t>(kind))) {
    return Status::InvalidArgument("unknown file kind " +
                                   std::to_string(static_cast<unsigned>(kind)));
  }
  MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (by_name_.count(name) != 0) {
    return Status::AlreadyExists("file " + std::string(name) + " already exists");
  }
  if (next_id_ > kMaxFileId) return Status::ResourceExhausted("file ids exhausted");
  const uint64_t id = next_id_;
  const std::string payload = CreatePayload(id, kind, name);
  NOVA_RETURN_NOT_OK(AppendRecord(kCreate, payload));
  Status applied = ApplyRecord(kCreate, payload);
  CHECK(applied.ok()) << "catalog rejected its own record: " << applied.ToString();
  // The file is durably recorded whatever happens to the rewrite: a failure there only
  // stops later mutations (error_).
  MaybeRewrite().IgnoreError();
  return id;
}

Status FileCatalog::RemoveFile(uint64_t file_id) {
  MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (by_id_.count(file_id) == 0) {
    return Status::NotFound("no file with id " + std::to_string(file_id));
  }
  const std::string payload = IdPayload(file_id);
  NOVA_RETURN_NOT_OK(AppendRecord(kDelete, payload));
  Status applied = ApplyRecord(kDelete, payload);
  CHECK(applied.ok()) << "catalog rejected its own record: " << applied.ToString();
  MaybeRewrite().IgnoreError();  // as in AddFile
  return Status::OK();
}

Status FileCatalog::SetFence(uint32_t range_id, uint64_t epoch) {
  MutexLock lock(&mu_);
  auto it = fences_.find(range_id);
  if (it != fences_.end() && it->second == epoch) return Status::OK();
  if (epoch == 0 || (it != fences_.end() && epoch < it->second)) {
    return Status::InvalidArgument("fence of range " + std::to_string(range_id) + " at epoch " +
                                   std::to_string(epoch) + " would go back");
  }
  if (!error_.ok()) return error_;
  const std::string payload = FencePayload(range_id, epoch);
  NOVA_RETURN_NOT_OK(AppendRecord(kFence, payload));
  Status applied = ApplyRecord(kFence, payload);
  CHECK(applied.ok()) << "catalog rejected its own record: " << applied.ToString();
  MaybeRewrite().IgnoreError();  // as in AddFile
  return Status::OK();
}

std::map<uint32_t, uint64_t> FileCatalog::Fences() const {
  MutexLock lock(&mu_);
  return fences_;
}

std::optional<FileEntry> FileCatalog::Lookup(std::string_view name) const {
  MutexLock lock(&mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return by_id_.at(it->second);
}

std::optional<FileEntry> FileCatalog::Get(uint64_t file_id) const {
  MutexLock lock(&mu_);
  auto it = by_id_.find(file_id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

std::vector<FileEntry> FileCatalog::List() const {
  MutexLock lock(&mu_);
  std::vector<FileEntry> out;
  out.reserve(by_id_.size());
  for (const auto& [id, entry] : by_id_) out.push_back(entry);
  return out;
}

uint64_t FileCatalog::next_file_id() const {
  MutexLock lock(&mu_);
  return next_id_;
}

uint64_t FileCatalog::log_records() const {
  MutexLock lock(&mu_);
  return log_records_;
}

}  // namespace nova::stoc
