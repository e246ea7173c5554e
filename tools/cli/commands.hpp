#pragma once
// The tool's commands, one file each (cmd_*.cpp). Each returns the exit status or throws cli_error.
// Layer: tools/cli. Threading: the calling thread only.

#include "options.hpp"

namespace rdmarpc::cli {

int run_list(const options& o);
int run_describe(const options& o);
int run_call(const options& o);
int run_health(const options& o);
int run_bench(const options& o);
int run_stats(const options& o);

}  // namespace rdmarpc::cli
