#include "tools/nmkit/signal_cleanup.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "nmkit/files.h"

namespace nmkit::cli {
namespace {

// Only async-signal-safe calls below: write(2), unlink(2) (in remove_temporaries), _exit, raise,
// pthread_kill.
void write_text(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

pthread_t g_main_thread;

void on_termination(int signal_number) {
  // The main thread is the one that creates outputs. Run on another thread (an OpenMP worker: the
  // kernel picks any thread that does not block the signal), the clean-up would race it: a file it
  // makes in a temporary folder after the folder was listed keeps the folder from being removed.
  // So the signal is passed to the main thread, which the handler then stops while it cleans up.
  if (!pthread_equal(pthread_self(), g_main_thread)) {
    pthread_kill(g_main_thread, signal_number);
    return;
  }
  remove_temporaries();
  // Default action from here on: the process ends "killed by SIGINT/SIGTERM", as a shell expects.
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

void on_bus_error(int, siginfo_t* info, void*) {
  remove_temporaries();
  const char* file = info != nullptr ? mapped_input_at(info->si_addr) : nullptr;
  if (file != nullptr) {
    write_text("nmkit: ");
    write_text(file);
    write_text(": changed size while being read\n");
    ::_exit(1);
  }
  // Not an input mapping: a real fault, reported as one.
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

}  // namespace

void install_signal_cleanup() {
  g_main_thread = pthread_self();
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  action.sa_handler = on_termination;
  // SIGHUP: a closed terminal or ssh session; SIGPIPE: `nmkit eval ... | head` once head exits.
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) {
    // A signal the parent ignores stays ignored (nohup ignores SIGHUP, a shell's background jobs
    // SIGINT): the process is not meant to end by it.
    struct sigaction inherited {};
    if (::sigaction(signal_number, nullptr, &inherited) == 0 && inherited.sa_handler == SIG_IGN) continue;
    ::sigaction(signal_number, &action, nullptr);
  }
  struct sigaction bus {};
  sigemptyset(&bus.sa_mask);
  bus.sa_sigaction = on_bus_error;
  bus.sa_flags = SA_SIGINFO;
  ::sigaction(SIGBUS, &bus, nullptr);
}

}  // namespace nmkit::cli
