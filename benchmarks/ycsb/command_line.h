// nova_ycsb's command line, as YCSB's Client parses it:
//
//   nova_ycsb -load|-run|-t -db NAME [-P workloadfile]... [-p name=value]...
//             [-threads N] [-target OPS] [-s] [-l LABEL]
//
// Workload files are read in order (later ones override earlier ones); -p and the flags
// override every file, wherever they appear (YCSB's precedence).
#pragma once

#include <string>
#include <vector>

#include "benchmarks/ycsb/properties.h"
#include "common/status.h"

namespace nova::ycsb {

struct CommandLine {
  bool help = false;
  Properties props;  // files merged, then command-line properties on top
};

// Parses argv[1..]. InvalidArgument for an unknown flag, a flag missing its value, a
// malformed -p, neither or both of -load/-run; IOError for an unreadable -P file.
Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args);

// The --help text: flags, every supported property with its default, the bindings.
std::string UsageText(const std::string& bindings);

}  // namespace nova::ycsb
