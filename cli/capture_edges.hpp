// Captures as people take them, said once at the end of a run (decode and analyze):
// a --port that selected no Redis traffic in capture files (and where RESP was seen
// instead), and a capture that holds one direction of its connections only.
#pragma once

#include "capture_options.hpp"
#include "lockscope/ingest/ingest_pipeline.hpp"

namespace lockscope::cli {

// Capture files read with --port, and no RESP connection on those ports: says so on
// stderr, naming the servers where RESP was seen (a second read of the files without
// --port; standard input cannot be read again, and says so), and returns 2 (an argument
// the capture contradicts, as --lock naming no lock). Otherwise 0, and nothing is read.
int report_port_miss(const char* command, const std::vector<std::string>& files, const ingest::ingest_options& options,
                     const ingest::ingest_stats& s);

// One warning on stderr when RESP connections held requests only or replies only
// (tcpdump 'dst port 6379'): what is missing and what cannot be decided without it.
void report_one_direction(const char* command, const ingest::ingest_stats& s);

// Whether every RESP connection of the capture held one direction only.
bool one_direction_only(const ingest::ingest_stats& s) noexcept;

}  // namespace lockscope::cli
