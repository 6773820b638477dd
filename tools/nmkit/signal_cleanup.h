// Signal handling of the nmkit executable (issue 13, C3 and M2): SIGINT and SIGTERM remove this
// process's temporaries and then end it as the signal would; SIGBUS while reading a mapped input
// (the file was truncated under us) removes them, prints "nmkit: FILE: changed size while being
// read" and exits 1.
#pragma once

namespace nmkit::cli {

void install_signal_cleanup();

}  // namespace nmkit::cli
