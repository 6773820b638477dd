// Signal handling of the nmkit executable (issue 13, C3 and M2; issue 24): SIGINT, SIGTERM, SIGHUP
// and SIGPIPE remove this process's temporaries (files and folders) and then end it as the signal
// would (a signal the parent left ignored, as nohup does SIGHUP, stays ignored); SIGBUS while
// reading a mapped input (the file was truncated under us) removes them, prints "nmkit: FILE:
// changed size while being read" and exits 1. The thread that calls install_signal_cleanup (main)
// runs the clean-up of the first four: another thread that gets one passes it on.
#pragma once

namespace nmkit::cli {

void install_signal_cleanup();

}  // namespace nmkit::cli
