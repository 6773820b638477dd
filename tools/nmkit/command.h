// Subcommand registry: each tools/nmkit/cmd_*.cc registers itself with a static initializer, so
// adding a command touches no shared file. Names with a space ("bench quant") nest under a parent.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace nmkit::cli {

// Declares the subcommand's options on `app` and returns the action run when it is chosen; the
// action returns the process exit code (0 success, 1 bad input or failure, 2 usage).
using CommandSetup = std::function<std::function<int()>(CLI::App& app)>;

struct CommandSpec {
  std::string name;         // "prune", "bench quant"
  std::string description;  // one line for --help
  int order = 100;          // position in --help (lower first)
  CommandSetup setup;
};

bool register_command(CommandSpec spec);

}  // namespace nmkit::cli
