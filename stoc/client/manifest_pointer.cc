#include "stoc/client/manifest_pointer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/crc32c.h"

namespace nova::stoc {

namespace {

constexpr char kMagic[] = "nova-manifest-pointer";  // DO NOT CHANGE: persisted
constexpr int kVersion = 1;

std::string Body(const ManifestPointer::Numbers& n) {
  return std::string(kMagic) + " " + std::to_string(kVersion) + " " + std::to_string(n.allocated) +
         " " + std::to_string(n.committed);
}

Status SyncPath(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  Status s = ::fsync(fd) == 0 ? Status::OK() : Status::FromErrno("fsync " + path, errno);
  ::close(fd);
  return s;
}

}  // namespace

Result<ManifestPointer::Numbers> ManifestPointer::Load() const {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec) && !ec) return Numbers{};
  std::ifstream in(path_);
  if (!in) return Status::IOError("reading " + path_);
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line);
  std::string magic;
  int version = 0;
  Numbers n;
  uint32_t crc = 0;
  if (!(fields >> magic >> version >> n.allocated >> n.committed >> crc) || magic != kMagic ||
      version != kVersion || crc32c::Value(Body(n)) != crc || n.committed > n.allocated) {
    return Status::Corruption(path_ + ": not a MANIFEST pointer: '" + line + "'");
  }
  return n;
}

Status ManifestPointer::Store(const Numbers& numbers) {
  const std::filesystem::path path(path_);
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return Status::IOError("creating " + path.parent_path().string() + ": " + ec.message());
  const std::string body = Body(numbers);
  const std::string line = body + " " + std::to_string(crc32c::Value(body)) + "\n";
  const std::string tmp = path_ + ".tmp";
  {
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno("creating " + tmp, errno);
    const ssize_t w = ::write(fd, line.data(), line.size());
    const bool written = w == static_cast<ssize_t>(line.size());
    const int err = errno;
    const bool synced = written && ::fdatasync(fd) == 0;
    ::close(fd);
    if (!written) return Status::FromErrno("writing " + tmp, err);
    if (!synced) return Status::FromErrno("fdatasync " + tmp, errno);
  }
  if (::rename(tmp.c_str(), path_.c_str()) != 0) {
    return Status::FromErrno("renaming " + tmp, errno);
  }
  return SyncPath(path.parent_path().string(), O_RDONLY | O_DIRECTORY);
}

}  // namespace nova::stoc
