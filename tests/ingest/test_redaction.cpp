// Redaction fails closed: one row per way a Redis command carries a secret, checked on
// find_secrets and through the whole ingest pipeline (text and JSONL output).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "lockscope/ingest/output.hpp"
#include "lockscope/ingest/redaction.hpp"

using namespace lockscope::ingest;
using namespace lockscope::ingest::test;
using strings = std::vector<std::string>;
using positions = std::vector<std::uint32_t>;

namespace {

struct redaction_case {
  std::string label;
  strings args;
  positions secret;  // the argument positions that must be masked
};

std::vector<redaction_case> table() {
  std::vector<redaction_case> rows = {
      {"AUTH password", {"AUTH", "s3cret-1"}, {1}},
      {"AUTH user password", {"AUTH", "default", "s3cret-1"}, {2}},
      {"auth in lower case", {"auth", "s3cret-1"}, {1}},
      {"AUTH with a wrong count masks all", {"AUTH", "s3cret-1", "s3cret-2", "s3cret-3"}, {1, 2, 3}},
      {"HELLO AUTH", {"HELLO", "3", "AUTH", "user", "s3cret-1"}, {4}},
      {"HELLO AUTH then SETNAME", {"HELLO", "2", "AUTH", "user", "s3cret-1", "SETNAME", "n"}, {4}},
      {"HELLO SETNAME named AUTH", {"HELLO", "3", "SETNAME", "AUTH", "AUTH", "user", "s3cret-1"}, {6}},
      {"HELLO AUTH without a user", {"HELLO", "3", "AUTH", "s3cret-1"}, {3}},
      {"HELLO without a version", {"hello", "auth", "user", "s3cret-1"}, {3}},
      {"HELLO with an unknown word", {"HELLO", "3", "SETNAME", "n", "s3cret-1", "s3cret-2"}, {4, 5}},
      {"MIGRATE AUTH", {"MIGRATE", "h", "6379", "k", "0", "5000", "AUTH", "s3cret-1"}, {7}},
      {"MIGRATE COPY REPLACE AUTH2 before KEYS",
       {"MIGRATE", "h", "6379", "", "0", "5000", "COPY", "REPLACE", "AUTH2", "user", "s3cret-1", "KEYS", "a", "b"},
       {10}},
      {"MIGRATE of a key named KEYS", {"MIGRATE", "h", "6379", "KEYS", "0", "5000", "AUTH", "s3cret-1"}, {7}},
      {"MIGRATE of a key named AUTH", {"MIGRATE", "AUTH", "6379", "AUTH", "0", "5000", "AUTH", "s3cret-1"}, {7}},
      {"MIGRATE keys named AUTH after KEYS", {"MIGRATE", "h", "6379", "", "0", "5000", "KEYS", "AUTH", "k"}, {}},
      {"MIGRATE AUTH2 missing the user", {"MIGRATE", "h", "6379", "k", "0", "5000", "AUTH2", "s3cret-1"}, {7}},
      {"MIGRATE unknown option", {"MIGRATE", "h", "6379", "k", "0", "5000", "AUHT", "s3cret-1"}, {6, 7}},
      {"CONFIG SET requirepass", {"CONFIG", "SET", "requirepass", "s3cret-1"}, {3}},
      {"CONFIG SET masterauth", {"config", "set", "MasterAuth", "s3cret-1"}, {3}},
      {"CONFIG SET tls-key-file-pass", {"CONFIG", "SET", "tls-key-file-pass", "s3cret-1"}, {3}},
      {"CONFIG SET tls-client-key-file-pass", {"CONFIG", "SET", "tls-client-key-file-pass", "s3cret-1"}, {3}},
      {"CONFIG SET several", {"CONFIG", "SET", "maxmemory", "1", "requirepass", "s3cret-1", "masterauth", "s3cret-2"},
       {5, 7}},
      {"CONFIG SET miscounted", {"CONFIG", "SET", "maxmemory", "requirepass", "s3cret-1"}, {4}},
      {"CONFIG SET masteruser is not a secret", {"CONFIG", "SET", "masteruser", "replica"}, {}},
      {"CONFIG GET", {"CONFIG", "GET", "requirepass"}, {}},
      {"CONFIG SET tls-auth-clients is not a secret", {"CONFIG", "SET", "tls-auth-clients", "optional"}, {}},
      {"ACL SETUSER >password", {"ACL", "SETUSER", "u", "on", ">s3cret-1", "~*", "+@all"}, {4}},
      {"ACL SETUSER <password", {"acl", "setuser", "u", "<s3cret-1"}, {3}},
      {"ACL SETUSER #hash", {"ACL", "SETUSER", "u", "#" + std::string(64, 'a') + "s3cret-1"}, {3}},
      {"ACL SETUSER !hash", {"ACL", "SETUSER", "u", "!" + std::string(64, 'b') + "s3cret-1"}, {3}},
      {"ACL SETUSER rules in one word", {"ACL", "SETUSER", "u", "on >s3cret-1"}, {3}},
      {"ACL SETUSER selector", {"ACL", "SETUSER", "u", "(~k* >s3cret-1)"}, {3}},
      {"ACL SETUSER without passwords", {"ACL", "SETUSER", "u", "on", "nopass", "resetpass", "~*", "&*", "-@all"}, {}},
      {"SENTINEL SET auth-pass", {"SENTINEL", "SET", "mymaster", "auth-pass", "s3cret-1"}, {4}},
      {"SENTINEL SET auth-user", {"SENTINEL", "SET", "mymaster", "quorum", "2", "auth-user", "s3cret-1"}, {6}},
      {"SENTINEL CONFIG SET sentinel-pass", {"SENTINEL", "CONFIG", "SET", "sentinel-pass", "s3cret-1"}, {4}},
      {"SENTINEL CONFIG SET sentinel-user", {"sentinel", "config", "set", "sentinel-user", "s3cret-1"}, {4}},
      {"ordinary commands are left alone", {"SET", "requirepass", "AUTH"}, {}},
      {"EVAL is left alone", {"EVAL", "return 1", "0", "AUTH", "x"}, {}},
  };

  // Positions >= 64 and >= 1000: wherever a command may put a secret.
  auto far = [&](std::string label, strings args) {
    positions p;
    for (std::uint32_t i = 0; i < args.size(); ++i) {
      if (args[i].find("s3cret") != std::string::npos) p.push_back(i);
    }
    rows.push_back({std::move(label), std::move(args), std::move(p)});
  };
  for (const std::size_t filler : {70u, 1200u}) {
    const std::string n = std::to_string(filler);
    strings pairs;  // maxmemory-samples 5 ... as CONFIG SET and SENTINEL SET take them
    for (std::size_t i = 0; i < filler; ++i) pairs.push_back(i % 2 == 0 ? "maxmemory-samples" : "5");
    strings config = {"CONFIG", "SET"};
    config.insert(config.end(), pairs.begin(), pairs.end());
    config.insert(config.end(), {"requirepass", "s3cret-far"});
    far("CONFIG SET after " + n + " words", config);
    strings sentinel = {"SENTINEL", "SET", "mymaster"};
    sentinel.insert(sentinel.end(), pairs.begin(), pairs.end());
    sentinel.insert(sentinel.end(), {"auth-pass", "s3cret-far"});
    far("SENTINEL SET after " + n + " words", sentinel);
    strings acl = {"ACL", "SETUSER", "u"};
    for (std::size_t i = 0; i < filler; ++i) acl.push_back("~key" + std::to_string(i));
    acl.insert(acl.end(), {">s3cret-far", "<s3cret-far2"});
    far("ACL SETUSER after " + n + " rules", acl);
    strings migrate = {"MIGRATE", "h", "6379", "", "0", "5000"};
    for (std::size_t i = 0; i < filler; ++i) migrate.push_back(i % 2 == 0 ? "COPY" : "REPLACE");
    migrate.insert(migrate.end(), {"AUTH2", "user", "s3cret-far", "KEYS", "a"});
    far("MIGRATE after " + n + " options", migrate);
    strings auth = {"AUTH"};
    for (std::size_t i = 0; i < filler; ++i) auth.push_back("s3cret-" + std::to_string(i));
    far("AUTH with " + n + " arguments", auth);
  }
  return rows;
}

std::string encode(const strings& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const std::string& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

// What the decoder would print for each exchange, in both formats, nothing cut.
class printing_sink final : public exchange_sink {
 public:
  void on_exchange(const exchange& e) override {
    commands.emplace_back(e.command.begin(), e.command.end());
    append_text_line(text, e, {0, false});
    text += '\n';
    append_jsonl(jsonl, e);
    jsonl += '\n';
  }
  std::vector<strings> commands;
  std::string text;
  std::string jsonl;
};

printing_sink run_session(const strings& args, bool show_secrets) {
  script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake().client(encode(args)).server("-ERR some reply\r\n").close();
  ingest_options o;
  o.session.show_secrets = show_secrets;
  printing_sink sink;
  ingest_pipeline a(o, sink);
  run_frames(a, s.segments);
  a.finish();
  return sink;
}

}  // namespace

TEST_CASE("redaction table: every secret-carrying argument of every command, at any position", "[redaction]") {
  for (const redaction_case& row : table()) {
    CAPTURE(row.label);
    positions found;
    const std::vector<std::string_view> views(row.args.begin(), row.args.end());
    if (may_carry_secrets(views[0])) find_secrets(views, found);
    CHECK(found == row.secret);
    if (row.args.size() >= 64) CHECK(!row.secret.empty());  // the far rows do reach past 64
    if (row.args.size() >= 1000) CHECK(row.secret.back() >= 1000);

    // Through the decoder: masked in the exchange, absent from text and JSONL.
    const printing_sink hidden = run_session(row.args, false);
    REQUIRE(hidden.commands.size() == 1);
    const strings& shown = hidden.commands[0];
    REQUIRE(shown.size() == row.args.size());
    for (std::uint32_t i = 0; i < shown.size(); ++i) {
      const bool secret = std::find(row.secret.begin(), row.secret.end(), i) != row.secret.end();
      CHECK(shown[i] == (secret ? "****" : row.args[i]));
    }
    for (const std::uint32_t i : row.secret) {
      CHECK(hidden.text.find(row.args[i]) == std::string::npos);
      CHECK(hidden.jsonl.find(row.args[i]) == std::string::npos);
    }
    // --show-secrets shows them.
    const printing_sink open = run_session(row.args, true);
    REQUIRE(open.commands.size() == 1);
    CHECK(open.commands[0] == row.args);
  }
}

TEST_CASE("redaction table rows reach positions >= 64 and >= 1000", "[redaction]") {
  std::size_t far = 0;
  std::size_t very_far = 0;
  for (const redaction_case& row : table()) {
    for (const std::uint32_t i : row.secret) {
      far += i >= 64;
      very_far += i >= 1000;
    }
  }
  CHECK(far >= 5);
  CHECK(very_far >= 5);
}

// Replies: what the server echoes or shows of a secret is masked as the command is.
namespace {

struct reply_case {
  std::string label;
  std::vector<strings> commands;  // sent in order (HELLO 3 first for RESP3 rows)
  std::string replies;            // the server's bytes, one reply per command
  strings secrets;                // text that must appear in no output
  strings kept;                   // text that must still appear (what is not a secret)
};

std::string bulk(std::string_view s) { return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n"; }

// Redis's error for an unknown command: its arguments quoted, cut to 128 bytes in all
// (server.c, processCommand), CR and LF turned into spaces (addReplyErrorLength).
std::string unknown_command(const strings& args) {
  std::string quoted;
  for (std::size_t i = 1; i < args.size() && quoted.size() < 128; ++i) {
    quoted += "'" + args[i].substr(0, 128 - quoted.size()) + "' ";
  }
  std::string text = "ERR unknown command '" + args[0] + "', with args beginning with: " + quoted;
  std::replace(text.begin(), text.end(), '\r', ' ');
  std::replace(text.begin(), text.end(), '\n', ' ');
  return "-" + text + "\r\n";
}

const std::string hash_a = std::string(32, 'a') + std::string(32, 'f');  // a SHA-256 in hex
const std::string hash_b = std::string(32, '0') + std::string(32, '9');
const std::string hello3_reply = "%1\r\n+proto\r\n:3\r\n";

std::vector<reply_case> reply_table() {
  const strings sentinel = {"SENTINEL", "SET", "mymaster", "auth-pass", "s3cret-1"};
  const strings long_pw = {"SENTINEL", "SET", "mymaster", "auth-pass", "s3cret-" + std::string(200, 'x')};
  const strings crlf_pw = {"SENTINEL", "SET", "mymaster", "auth-pass", "s3cret\r\n-crlf"};
  const strings short_pw = {"SENTINEL", "SET", "mymaster", "auth-pass", "ab"};
  const strings hello = {"HELLO", "3", "AUTH", "u", "s3cret-1"};
  const strings acl_err = {"ACL", "SETUSER", "u", "(>s3cret-1 ~k"};
  return {
      {"unknown command quoting a password", {sentinel}, unknown_command(sentinel), {"s3cret-1"}, {"auth-pass", "mymaster"}},
      {"a password Redis cut short in the echo", {long_pw}, unknown_command(long_pw), {"s3cret-xxx"}, {"auth-pass"}},
      {"a password with CR LF echoed as spaces", {crlf_pw}, unknown_command(crlf_pw), {"s3cret  -crlf", "crlf"},
       {"auth-pass"}},
      {"a two-letter password masked as a word only", {short_pw}, unknown_command(short_pw) , {"'ab'"},
       {"args beginning"}},
      {"HELLO AUTH answered by an error quoting it", {hello}, "-ERR bad auth s3cret-1 for u\r\n", {"s3cret-1"},
       {"bad auth"}},
      {"ACL SETUSER error quoting the rule", {acl_err},
       "-ERR Error in ACL SETUSER modifier '(>s3cret-1 ~k': Unmatched parenthesis in acl selector starting at "
       "'(>s3cret-1 ~k'.\r\n",
       {"s3cret-1"}, {"Unmatched parenthesis"}},
      {"CONFIG GET requirepass (RESP2)", {{"CONFIG", "GET", "requirepass"}}, "*2\r\n" + bulk("requirepass") + bulk("s3cret-1"),
       {"s3cret-1"}, {"requirepass"}},
      {"CONFIG GET * (RESP2): every credential, nothing else",
       {{"CONFIG", "GET", "*"}},
       "*12\r\n" + bulk("tls-auth-clients") + bulk("optional") + bulk("maxmemory") + bulk("0") + bulk("masterauth") + bulk("s3cret-1") + bulk("masteruser") +
           bulk("replica-user") + bulk("tls-key-file-pass") + bulk("s3cret-2") + bulk("requirepass") + bulk("s3cret-3"),
       {"s3cret-1", "s3cret-2", "s3cret-3"}, {"maxmemory", "masterauth", "replica-user", "requirepass", "\"optional\""}},
      {"CONFIG GET in RESP3 (a map)", {{"HELLO", "3"}, {"config", "get", "*pass*"}},
       hello3_reply + "%2\r\n" + bulk("requirepass") + bulk("s3cret-1") + bulk("masterauth") + bulk("s3cret-2"),
       {"s3cret-1", "s3cret-2"}, {"requirepass", "masterauth"}},
      {"SENTINEL CONFIG GET", {{"SENTINEL", "CONFIG", "GET", "*"}},
       "*4\r\n" + bulk("sentinel-user") + bulk("s3cret-1") + bulk("sentinel-pass") + bulk("s3cret-2"),
       {"s3cret-1", "s3cret-2"}, {"sentinel-pass"}},
      {"ACL LIST hashes", {{"ACL", "LIST"}},
       "*2\r\n" + bulk("user alice on #" + hash_a + " #" + hash_b + " ~* &* +@all") +
           bulk("user default on nopass sanitize-payload ~* &* +@all"),
       {hash_a, hash_b}, {"user alice on #****", "~* &* +@all", "nopass"}},
      {"ACL GETUSER passwords (RESP2)", {{"ACL", "GETUSER", "alice"}},
       "*8\r\n" + bulk("flags") + "*1\r\n" + bulk("on") + bulk("passwords") + "*2\r\n" + bulk(hash_a) + bulk(hash_b) +
           bulk("commands") + bulk("+@all") + bulk("keys") + bulk("~*"),
       {hash_a, hash_b}, {"passwords", "+@all"}},
      {"MULTI: CONFIG GET and ACL LIST answered in EXEC's reply",
       {{"MULTI"}, {"CONFIG", "GET", "requirepass"}, {"GET", "k"}, {"ACL", "LIST"}, {"EXEC"}},
       "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n*2\r\n" + bulk("requirepass") + bulk("s3cret-1") + bulk("v") +
           "*1\r\n" + bulk("user alice on #" + hash_a + " ~*"),
       {"s3cret-1", hash_a}, {"requirepass", "user alice on #****", "\"v\""}},
      {"MULTI: a queued command's masked argument echoed in EXEC's reply",
       {{"MULTI"}, {"CONFIG", "SET", "masterauth", "s3cret-1"}, {"EXEC"}},
       "+OK\r\n+QUEUED\r\n*1\r\n-ERR bad value 's3cret-1'\r\n", {"s3cret-1"}, {"bad value"}},
      {"ACL GETUSER passwords (RESP3)", {{"HELLO", "3"}, {"ACL", "GETUSER", "alice"}},
       hello3_reply + "%2\r\n" + bulk("flags") + "~1\r\n" + bulk("on") + bulk("passwords") + "*1\r\n" + bulk(hash_a),
       {hash_a}, {"passwords"}},
  };
}

printing_sink run_exchanges(const std::vector<strings>& commands, const std::string& replies, bool show_secrets) {
  script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake();
  for (const strings& c : commands) s.client(encode(c));
  s.server(replies).close();
  ingest_options o;
  o.session.show_secrets = show_secrets;
  printing_sink sink;
  ingest_pipeline a(o, sink);
  run_frames(a, s.segments);
  a.finish();
  return sink;
}

}  // namespace

TEST_CASE("redaction of replies: echoed arguments, CONFIG GET, ACL LIST and GETUSER", "[redaction]") {
  for (const reply_case& row : reply_table()) {
    CAPTURE(row.label);
    const printing_sink hidden = run_exchanges(row.commands, row.replies, false);
    REQUIRE(hidden.commands.size() == row.commands.size());
    CAPTURE(hidden.text);
    for (const std::string& secret : row.secrets) {
      CAPTURE(secret);
      CHECK(hidden.text.find(secret) == std::string::npos);
      CHECK(hidden.jsonl.find(secret) == std::string::npos);
    }
    for (const std::string& kept : row.kept) {
      CAPTURE(kept);
      CHECK(hidden.text.find(kept) != std::string::npos);
    }
    CHECK(hidden.text.find("****") != std::string::npos);
    // --show-secrets shows the replies as they were.
    const printing_sink open = run_exchanges(row.commands, row.replies, true);
    CHECK(open.text.find("****") == std::string::npos);
  }
}

TEST_CASE("redaction of replies: ordinary replies are not looked at", "[redaction]") {
  // The same text in a GET's reply is data, not an echo: shown.
  const printing_sink sink =
      run_exchanges({{"AUTH", "s3cret-1"}, {"GET", "k"}}, "+OK\r\n" + bulk("s3cret-1 user alice on #" + hash_a), false);
  REQUIRE(sink.commands.size() == 2);
  CHECK(sink.commands[0][1] == "****");
  CHECK(sink.text.find("s3cret-1 user alice on #" + hash_a) != std::string::npos);
}

TEST_CASE("mask_echoes: whole, cut short, CR LF as spaces, short secrets as words only", "[redaction]") {
  auto masked = [](std::string_view text, std::vector<std::string_view> secrets) {
    std::string out;
    if (!mask_echoes(text, secrets, out)) return std::string(text);
    return out;
  };
  CHECK(masked("x 'pw-long' y", {"pw-long"}) == "x '****' y");
  CHECK(masked("pw-longpw-long", {"pw-long"}) == "****");
  CHECK(masked("'pw-l' ", {"pw-long"}) == "'****' ");
  CHECK(masked("'pw a' ", {"pw\na"}) == "'****' ");
  CHECK(masked("tab 'ab' abc", {"ab"}) == "tab '****' abc");
  CHECK(masked("abcdef 'abcd'", {"abcdef", "cde"}) == "**** '****'");
  CHECK(masked("nothing here", {"pw-long", ""}) == "nothing here");
}

TEST_CASE("redaction of MONITOR lines: the arguments find_secrets names, escaped as Redis writes them",
          "[redaction]") {
  auto masked = [](std::string_view line) {
    std::string out;
    if (!mask_monitor_line(line, out)) return std::string(line);
    return out;
  };
  CHECK(masked(R"(1700000000.123456 [0 127.0.0.1:5000] "AUTH" "s3cret-1")") ==
        R"(1700000000.123456 [0 127.0.0.1:5000] "AUTH" "****")");
  CHECK(masked(R"(1.5 [0 127.0.0.1:5000] "HELLO" "3" "AUTH" "u" "s3\"cr\\et\x01")") ==
        R"(1.5 [0 127.0.0.1:5000] "HELLO" "3" "AUTH" "u" "****")");
  CHECK(masked(R"(1.5 [0 127.0.0.1:5000] "config" "set" "requirepass" "p w" "maxmemory" "1")") ==
        R"(1.5 [0 127.0.0.1:5000] "config" "set" "requirepass" "****" "maxmemory" "1")");
  CHECK(masked(R"(1.5 [0 lua] "SET" "requirepass" "x")") == R"(1.5 [0 lua] "SET" "requirepass" "x")");
  CHECK(masked(R"(1.5 [0 127.0.0.1:5000] "AUTH" "cut-sho)") == R"(1.5 [0 127.0.0.1:5000] "AUTH" "****")");

  // Through the session: a MONITOR connection's lines.
  script s(ep("10.0.0.1", 52000), ep("10.0.0.2", 6379));
  s.handshake().client(encode({"MONITOR"})).server("+OK\r\n");
  s.server("+1700000000.123456 [0 10.0.0.9:4000] \"AUTH\" \"s3cret-1\"\r\n");
  s.server("+1700000000.223456 [0 10.0.0.9:4000] \"GET\" \"s3cret-1\"\r\n").close();
  for (const bool show : {false, true}) {
    ingest_options o;
    o.session.show_secrets = show;
    printing_sink sink;
    ingest_pipeline a(o, sink);
    run_frames(a, s.segments);
    a.finish();
    CAPTURE(sink.text);
    CHECK((sink.text.find(R"("AUTH" "s3cret-1")") == std::string::npos) == !show);
    CHECK((sink.text.find(R"("AUTH" "****")") == std::string::npos) == show);
    CHECK(sink.text.find(R"("GET" "s3cret-1")") != std::string::npos);  // data, not a password
  }
}

TEST_CASE("redaction of replies: a transaction with more secrets than are kept masks every string of EXEC's reply",
          "[redaction]") {
  std::vector<strings> commands = {{"MULTI"}};
  std::string replies = "+OK\r\n";
  std::string exec = "*70\r\n";
  for (int i = 0; i < 70; ++i) {
    commands.push_back({"CONFIG", "SET", "masterauth", "s3cret-" + std::to_string(1000 + i)});
    replies += "+QUEUED\r\n";
    exec += "-ERR no 's3cret-" + std::to_string(1000 + i) + "'\r\n";
  }
  commands.push_back({"EXEC"});
  const printing_sink sink = run_exchanges(commands, replies + exec, false);
  REQUIRE(sink.commands.size() == commands.size());
  CHECK(sink.text.find("s3cret-") == std::string::npos);
  CHECK(sink.jsonl.find("s3cret-") == std::string::npos);
}
