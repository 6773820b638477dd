// nmkit: N:M structured sparsity for LLM weights. Dispatches to the registered subcommands.
#include <algorithm>
#include <cstdio>
#include <map>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "tools/nmkit/cli_util.h"
#include "tools/nmkit/command.h"
#include "tools/nmkit/memory.h"
#include "tools/nmkit/signal_cleanup.h"

namespace nmkit::cli {
namespace {

std::vector<CommandSpec>& registry() {
  static std::vector<CommandSpec> commands;
  return commands;
}

}  // namespace

bool register_command(CommandSpec spec) {
  registry().push_back(std::move(spec));
  return true;
}

// Runs a subcommand. Exceptions reach here only from failed allocations (the library reports bad
// input as Errors) and from bugs: either is one line and exit 1, and the unwinding has removed the
// command's temporaries (PendingFile, PendingFolder) first, where std::terminate would have aborted
// with them left (issue 24, item 2).
int run_command(const std::function<int()>& action) {
  try {
    return action();
  } catch (const std::bad_alloc&) {
    return report_error(out_of_memory_message());
  } catch (const std::exception& e) {
    return report_error(std::string("internal error: ") + e.what());
  }
}

}  // namespace nmkit::cli

int main(int argc, char** argv) {
  using namespace nmkit::cli;
  install_signal_cleanup();
  CLI::App app{"nmkit: prune LLM checkpoints to N:M sparsity, slide (2N-2):2N onto 2:4 (SlideSparse), "
               "pack, run and check sparse weights"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nmkit 0.1.0");

  auto commands = registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const CommandSpec& a, const CommandSpec& b) { return a.order < b.order; });
  std::map<std::string, CLI::App*> parents;
  std::vector<std::pair<CLI::App*, std::function<int()>>> actions;
  for (const auto& spec : commands) {
    CLI::App* parent = &app;
    std::string leaf = spec.name;
    if (auto space = spec.name.find(' '); space != std::string::npos) {
      const std::string parent_name = spec.name.substr(0, space);
      leaf = spec.name.substr(space + 1);
      auto& slot = parents[parent_name];
      if (slot == nullptr) {
        slot = app.add_subcommand(parent_name, "Benchmarks: nmkit next to real baselines, in one run");
        slot->require_subcommand(1);
      }
      parent = slot;
    }
    CLI::App* sub = parent->add_subcommand(leaf, spec.description);
    actions.emplace_back(sub, spec.setup(*sub));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, action] : actions) {
    if (sub->parsed()) return run_command(action);
  }
  return 2;
}
