// `lockscope analyze`'s recording options on the command line: --replay (a capture file
// through the live loop), --write (tcpdump -w with -C/-G rotation) and --save-anomalies
// (the flight recorder), and the live loop's packet source. The hooks that write and
// save are the live library's (lockscope/live/recorder_hooks.hpp).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "capture_options.hpp"
#include "lockscope/ingest/capture.hpp"
#include "lockscope/live/recorder_hooks.hpp"

namespace lockscope::cli {

using live::recorder_options;

// Registers --replay and --replay-speed (decode has only these).
void add_replay_options(CLI::App& cmd, recorder_options& o);

// Registers --replay, --replay-speed, --write, -C, -G, --save-anomalies, --save-window,
// --save-after, --save-buffer, --save-max-mb.
void add_recorder_options(CLI::App& cmd, recorder_options& o);

// Throws CLI::ValidationError for --save-anomalies or --write without -i or --replay.
void require_live_for_recording(const std::string& command, const capture_options& c, const recorder_options& o);

// Throws CLI::ValidationError when -G would give two intervals the same --write name
// (FILE has no strftime time conversion, or only ones coarser than -G).
void refuse_reused_rotation_names(const recorder_options& o);

// Throws CLI::ValidationError when an output (`output`, -o; --write FILE, or one of the
// FILE1, FILE2… that -C makes) is one of the inputs (capture files, --replay): it would
// be overwritten while, or before, it is read.
void refuse_overwriting_inputs(const capture_options& c, const recorder_options& o, const std::string& output);

// The live loop's packets: -i IFACE, or --replay FILE at --replay-speed. Prints the
// error ("lockscope COMMAND: …") and returns nullptr when it cannot be opened.
std::unique_ptr<ingest::packet_source> open_packet_source(const char* command, const capture_options& c,
                                                            const recorder_options& o);

}  // namespace lockscope::cli
