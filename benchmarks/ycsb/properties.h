// Properties: YCSB's configuration, a flat map of name -> string value, filled from
// workload files (-P, Java .properties syntax) and command-line overrides (-p name=value).
//
// Typed getters validate: a value that does not parse as the requested type is an
// InvalidArgument Status naming the property, never a silent default.
//
// Thread safety: thread-compatible (const methods may be called concurrently).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace nova::ycsb {

class Properties {
 public:
  Properties() = default;

  // Sets (or replaces) one property.
  void Set(std::string_view name, std::string_view value);
  bool Has(std::string_view name) const;
  // The raw value, or `default_value` when absent.
  std::string Get(std::string_view name, std::string_view default_value = "") const;

  // Typed getters: `default_value` when absent; InvalidArgument when present but malformed
  // (the message names the property and the offending text). Integers must be plain
  // decimal (a leading sign allowed); booleans are true/false (case-insensitive), as
  // Java's Boolean.parseBoolean accepts.
  Result<int64_t> GetInt(std::string_view name, int64_t default_value) const;
  Result<double> GetDouble(std::string_view name, double default_value) const;
  Result<bool> GetBool(std::string_view name, bool default_value) const;

  // Parses "name=value" (the form of -p). InvalidArgument if there is no '=' or the name
  // is empty.
  Status ParseAssignment(std::string_view assignment);
  // Parses the text of a .properties file: one `name=value` or `name: value` per line,
  // blank lines and lines starting with '#' or '!' ignored, whitespace around names and
  // values trimmed. `origin` (the file name) prefixes error messages. Line continuations
  // and escapes of Java's format are not supported (YCSB's workload files use neither).
  Status ParseText(std::string_view text, std::string_view origin);
  // Reads and parses a file. IOError if it cannot be read.
  Status LoadFile(const std::string& path);

  // Copies every property of `other` into this, overriding equal names.
  void MergeFrom(const Properties& other);

  const std::map<std::string, std::string, std::less<>>& all() const { return values_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

}  // namespace nova::ycsb
