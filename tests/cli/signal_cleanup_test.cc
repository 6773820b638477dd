// Issue 13, C3 and M2: the nmkit executable's signal handlers (tools/nmkit/signal_cleanup.cc), run in
// a forked child so the test can truncate an input under its mapping and send itself SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <vector>

#include "tests/cli/cli_harness.h"
#include "nmkit/files.h"
#include "nmkit/safetensors.h"
#include "tools/nmkit/signal_cleanup.h"

namespace nmkit::cli_test {
namespace {

class SignalCleanup : public CliTest {
 protected:
  bool has_temporary() const {
    for (const auto& name : listing()) {
      if (name.find(".tmp.") != std::string::npos) return true;
    }
    return false;
  }
};

// A SIGBUS from reading a mapped input that shrank: one line naming the file, exit 1, the output's
// temporary (here 4 MiB, reserved up front) removed. Before the fix: killed by SIGBUS, temporary left.
TEST_F(SignalCleanup, TruncatedInputIsReportedAndTheTemporaryRemoved) {
  GTEST_FLAG_SET(death_test_style, "fast");  // a fork: the child writes into this test's folder
  const std::vector<float> values(1 << 18, 1.0f);  // 1 MiB of data
  write_file("in.safetensors", safetensors_bytes({{"w", "F32", {512, 512}, f32_bytes(values)}}));
  const std::string in = path("in.safetensors");
  const std::string out = path("out.safetensors");
  EXPECT_EXIT(
      {
        cli::install_signal_cleanup();
        auto file = SafetensorsFile::open(in);
        if (!file.ok()) std::_Exit(3);
        auto pending = PendingFile::create(out, 4 << 20);
        if (!pending.ok()) std::_Exit(4);
        if (::truncate(in.c_str(), 4096) != 0) std::_Exit(5);
        const TensorView w = file->view(file->tensors()[0]);
        volatile std::byte last = w.data[w.nbytes() - 1];  // beyond the new end of file: SIGBUS
        (void)last;
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(1), "nmkit: .*in.safetensors: changed size while being read");
  EXPECT_FALSE(has_temporary());
}

// SIGINT and SIGTERM remove the temporaries and still end the process by that signal.
TEST_F(SignalCleanup, TerminationRemovesTemporaries) {
  GTEST_FLAG_SET(death_test_style, "fast");  // a fork: the child writes into this test's folder
  const std::string out = path("out.safetensors");
  for (const int signal_number : {SIGTERM, SIGINT}) {
    EXPECT_EXIT(
        {
          cli::install_signal_cleanup();
          auto pending = PendingFile::create(out, 1 << 20);
          auto report = PendingFile::create(path("report.json"));
          if (!pending.ok() || !report.ok()) std::_Exit(4);
          ::raise(signal_number);
          std::_Exit(0);
        },
        ::testing::KilledBySignal(signal_number), "");
    EXPECT_FALSE(has_temporary()) << signal_number;
  }
}

}  // namespace
}  // namespace nmkit::cli_test
