#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "lockscope/live/diagnostics.hpp"
#include "commands.hpp"
#include "lockscope/ingest/redaction.hpp"
#include "lockscope/resp/decoder.hpp"
#include "lockscope/resp/format.hpp"
#include "lockscope/resp/value.hpp"

namespace lockscope::cli {

namespace {

struct resp_options {
  std::string file;
  std::string format = "parsed";
  bool allow_inline = false;
  std::size_t max_argument = 0;
  bool shorten_owner_ids = false;
  bool show_secrets = false;
};

// Passwords become "****", by the rules decode and analyze follow (redaction.hpp): a
// saved request stream (a `redis-cli --pipe` input) carries AUTH, HELLO … AUTH and the
// like. A reply that reads like such a command is masked too: failing closed.
void redact(resp::value& v) {
  if (v.type != resp::type::array || v.elements.empty() || !v.elements[0].is_string() ||
      !ingest::may_carry_secrets(v.elements[0].text)) {
    return;
  }
  std::vector<std::string_view> args;
  args.reserve(v.elements.size());
  for (const resp::value& e : v.elements) args.push_back(e.is_string() ? std::string_view(e.text) : std::string_view());
  std::vector<std::uint32_t> secrets;
  ingest::find_secrets(args, secrets);
  for (const std::uint32_t i : secrets) v.elements[i] = resp::value::bulk("****");
}

// Prints each complete message as soon as its last node arrives.
class message_printer final : public resp::handler {
 public:
  explicit message_printer(const resp_options& o) : options_(o) {}
  void on_node(const resp::node& n) override {
    builder_.on_node(n);
    if (!n.ends_message()) return;
    for (resp::value& v : builder_.values()) {
      ++messages_;
      if (!options_.show_secrets) redact(v);
      if (options_.format == "cli") {
        fmt::print("{}\n", resp::to_cli(v));
      } else {
        fmt::print("{}\n", resp::to_parsed(v, {options_.max_argument, options_.shorten_owner_ids}));
      }
    }
    builder_.values().clear();
  }
  std::size_t messages() const noexcept { return messages_; }

 private:
  const resp_options& options_;
  resp::value_builder builder_;
  std::size_t messages_ = 0;
};

int run_resp(const resp_options& o) {
  std::FILE* in = o.file == "-" ? stdin : std::fopen(o.file.c_str(), "rb");
  if (in == nullptr) {
    live::print_diagnostic("lockscope resp: {}: {}\n", o.file, std::strerror(errno));
    return 2;
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(in == stdin ? nullptr : in, &std::fclose);

  resp::decoder_options decoder_options;
  decoder_options.allow_inline = o.allow_inline;
  resp::decoder decoder(decoder_options);
  message_printer printer(o);
  std::string buffer(64 * 1024, '\0');
  for (;;) {
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), in);
    if (n == 0) break;
    decoder.feed(std::string_view(buffer.data(), n), printer);
    if (decoder.error()) {
      live::print_diagnostic("lockscope resp: {}: offset {}: {}\n", o.file, decoder.error_offset(),
                 decoder.error().message());
      return 1;
    }
  }
  if (std::ferror(in)) {
    live::print_diagnostic("lockscope resp: {}: read error: {}\n", o.file, std::strerror(errno));
    return 2;
  }
  if (!decoder.at_message_boundary()) {
    live::print_diagnostic("lockscope resp: {}: offset {}: input ends inside a message\n", o.file,
               decoder.offset());
    return 1;
  }
  live::print_diagnostic("lockscope resp: {} messages, {} bytes\n", printer.messages(), decoder.offset());
  return 0;
}

}  // namespace

void add_resp_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<resp_options>();
  CLI::App* cmd = app.add_subcommand("resp", "Decode a raw RESP2/RESP3 byte stream and print each message");
  cmd->add_option("file", options->file, "File of RESP bytes, or - for stdin")->required();
  cmd->add_option("--format", options->format, "parsed (one line, as in the seeds) or cli (redis-cli)")
      ->check(CLI::IsMember({"parsed", "cli"}));
  cmd->add_flag("--inline", options->allow_inline, "Accept inline commands (request streams)");
  cmd->add_option("--max-argument", options->max_argument, "Cut longer arguments with … (0: never)");
  cmd->add_flag("--short-owners", options->shorten_owner_ids, "Write owner ids <uuid>:<tid> as 80e6…:12");
  cmd->add_flag("--show-secrets", options->show_secrets,
                "Do not redact passwords (AUTH, HELLO, MIGRATE, CONFIG SET, ACL SETUSER, SENTINEL)");
  cmd->callback([options, &exit_code] { exit_code = run_resp(*options); });
}

}  // namespace lockscope::cli
