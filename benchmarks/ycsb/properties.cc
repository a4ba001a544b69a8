#include "benchmarks/ycsb/properties.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace nova::ycsb {

namespace {

std::string_view Trim(std::string_view s) {
  const char* kSpace = " \t\r\f\v";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status Malformed(std::string_view name, std::string_view value, std::string_view want) {
  return Status::InvalidArgument("property " + std::string(name) + "=" + std::string(value) +
                                 ": not " + std::string(want));
}

}  // namespace

void Properties::Set(std::string_view name, std::string_view value) {
  values_[std::string(name)] = std::string(value);
}

bool Properties::Has(std::string_view name) const { return values_.find(name) != values_.end(); }

std::string Properties::Get(std::string_view name, std::string_view default_value) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::string(default_value) : it->second;
}

Result<int64_t> Properties::GetInt(std::string_view name, int64_t default_value) const {
  auto it = values_.find(name);
  if (it == values_.end()) return default_value;
  const std::string& v = it->second;
  if (v.empty()) return Malformed(name, v, "an integer");
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(v.c_str(), &end, 10);
  if (errno != 0 || end != v.c_str() + v.size()) return Malformed(name, v, "an integer");
  return static_cast<int64_t>(parsed);
}

Result<double> Properties::GetDouble(std::string_view name, double default_value) const {
  auto it = values_.find(name);
  if (it == values_.end()) return default_value;
  const std::string& v = it->second;
  if (v.empty()) return Malformed(name, v, "a number");
  errno = 0;
  char* end = nullptr;
  const double parsed = std::strtod(v.c_str(), &end);
  if (errno != 0 || end != v.c_str() + v.size()) return Malformed(name, v, "a number");
  return parsed;
}

Result<bool> Properties::GetBool(std::string_view name, bool default_value) const {
  auto it = values_.find(name);
  if (it == values_.end()) return default_value;
  const std::string v = Lower(it->second);
  if (v == "true") return true;
  if (v == "false") return false;
  return Malformed(name, it->second, "true or false");
}

Status Properties::ParseAssignment(std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument("expected name=value, got '" + std::string(assignment) + "'");
  }
  const std::string_view name = Trim(assignment.substr(0, eq));
  if (name.empty()) {
    return Status::InvalidArgument("empty property name in '" + std::string(assignment) + "'");
  }
  Set(name, Trim(assignment.substr(eq + 1)));
  return Status::OK();
}

Status Properties::ParseText(std::string_view text, std::string_view origin) {
  int line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line.empty() || line[0] == '#' || line[0] == '!') continue;
    const size_t sep = line.find_first_of("=:");
    if (sep == std::string_view::npos) {
      return Status::InvalidArgument(std::string(origin) + ":" + std::to_string(line_no) +
                                     ": expected name=value, got '" + std::string(line) + "'");
    }
    const std::string_view name = Trim(line.substr(0, sep));
    if (name.empty()) {
      return Status::InvalidArgument(std::string(origin) + ":" + std::to_string(line_no) +
                                     ": empty property name");
    }
    Set(name, Trim(line.substr(sep + 1)));
  }
  return Status::OK();
}

Status Properties::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::IOError("cannot read workload file " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return ParseText(buf.str(), path);
}

void Properties::MergeFrom(const Properties& other) {
  for (const auto& [k, v] : other.values_) values_[k] = v;
}

}  // namespace nova::ycsb
