#include "common/secret_file.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include <glog/logging.h>

namespace nova {

Result<std::string> ReadSecretFile(const std::string& path, std::string_view what) {
  const std::string name = std::string(what) + " " + path;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + name);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = ss.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) return Status::InvalidArgument(name + " is empty");
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    LOG(WARNING) << name << " is readable by group or others (chmod 600 it)";
  }
  return secret;
}

}  // namespace nova
