// `-o FILE`: where a command's output goes, shared by every output format.
//
//   output_file out(path);          // "" or "-": stdout
//   out.write(chunk) ...            // throws output_error naming the file
//   out.commit();                   // FILE.tmp renamed to FILE: only now does FILE exist
//
// The output is written to FILE.tmp next to FILE (same directory, so the rename is
// atomic) and renamed over FILE by commit(): a run that fails or is killed midway
// never leaves a truncated FILE that looks complete (a killed run leaves FILE.tmp;
// a failed one removes it). A FILE that is a device, FIFO or socket (`-o /dev/null`) is
// written in place; a symlink keeps pointing where it did (its target is replaced).
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace lockscope::cli {

struct output_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class output_file {
 public:
  // Throws output_error ("cannot write FILE: <reason>") when FILE.tmp cannot be created.
  explicit output_file(std::string path);
  ~output_file();  // without commit(): FILE.tmp is removed
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  void write(std::string_view s);
  void flush();  // stdout, or the file's buffer
  // Flushes, closes and renames; throws output_error.
  void commit();
  bool is_stdout() const noexcept { return path_.empty(); }
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_, tmp_path_;  // tmp_path_ "": written in place
  std::string rename_to_;         // path_, or the file a symlink at path_ names
  std::FILE* file_ = nullptr;
  [[noreturn]] void fail(const char* what, int err);
};

}  // namespace lockscope::cli
