#pragma once
// A file a command writes for the user (an export, a token file, a trace, a plot): it appears
// whole, or not at all, and never destroys what its path pointed at.
//
// What the path names decides how it is written, once, when the output is created:
// - nothing yet, or a regular file (through a symlink too): written to a temporary beside it
//   (.NAME.TAG.shardtrain-tmp, TAG this job's: see make_staging_tag) and renamed over it by
//   commit(), so a failure leaves the old file (or nothing); missing parent folders are created
//   (as for every output: checkpoint.dir, metrics.file, ...); Existing::refuse makes an existing
//   file an InputError (exports: replaced only when asked), and one that appears while the
//   output is written too, at commit();
// - a character device or a FIFO (/dev/null, /dev/stdout, a named pipe): written through, as a
//   stream; a FIFO nobody reads is refused rather than waited on;
// - a directory, a socket or a block device: refused.
// Refusals are InputErrors naming the output and the path.
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/file_io.hpp"

namespace st {

class StagedOutput {
 public:
  enum class Targets { any, regular_only };
  enum class Existing { replace, refuse };
  // `what` names the output in messages (a flag or a config key, "--out", "metrics.trace").
  // regular_only: outputs that several ranks fill at offsets (safetensors) cannot stream.
  // refuse: an existing regular file is an InputError (`how_to_replace` says what to add).
  // `staging_tag`: the job's tag (make_staging_tag), the same on every rank that writes the
  // temporary; "" makes one for this process alone.
  StagedOutput(std::string path, std::string what, Targets targets = Targets::any,
               Existing existing = Existing::replace, const std::string& how_to_replace = "",
               std::string staging_tag = "");
  ~StagedOutput();  // an uncommitted temporary is removed
  StagedOutput(const StagedOutput&) = delete;
  StagedOutput& operator=(const StagedOutput&) = delete;

  const std::string& path() const { return path_; }
  // Where the bytes go now: the temporary, or the device or FIFO itself.
  const std::string& write_path() const { return write_path_; }
  bool through() const { return through_; }
  // The file to write: the temporary (created on first use), or the device or FIFO (opened
  // when this was made, so a FIFO nobody reads is refused before any work).
  OutputFile& file();
  // An InputError naming the output when its temporary cannot be created beside the target
  // (a folder that cannot be created, or a read-only one). Leaves nothing behind but the
  // missing parent folders it created.
  void check_writable() const;
  // Renames the temporary over the target (durably); nothing to do when written through. With
  // Existing::refuse, a file that appeared at the path meanwhile is an InputError (kept as it
  // is; the temporary removed).
  void commit();
  // After commit(): removes the file commit() created, when it created one (a later output of
  // the same command failed); a replaced file or a stream stays as it is.
  void withdraw();

 private:
  std::string path_, what_;
  std::string target_;      // the regular file replaced: the path, or where its symlink points
  std::string write_path_;  // the temporary beside target_, or the device or FIFO
  bool through_ = false, committed_ = false;
  bool no_replace_ = false;  // Existing::refuse and nothing at the path when this was made
  std::unique_ptr<OutputFile> file_;
};

// A log written as it grows, read while it does (metrics.file): a regular file is created (with
// its missing parent folders) or truncated, a character device or FIFO written through (a FIFO
// nobody reads refused), anything else refused; InputErrors naming `what`.
std::unique_ptr<OutputFile> open_log_output(const std::string& path, const std::string& what);

// Writes `text` to `output` and commits it.
void write_output_text(StagedOutput& output, const std::string& text);

// Creates the missing folders above `path` (an output file's), or an InputError naming `what`.
void create_parent_folders(const std::string& path, const std::string& what);

// Commits each output, after all were written: a command's outputs appear together (when one
// fails, those committed before it that were new files are withdrawn).
void commit_together(std::initializer_list<StagedOutput*> outputs);

// A tag naming one job's temporaries, HOST.PID.RANDOM (this process's): made by one rank and
// sent to the others, so that two jobs writing the same output never share a temporary.
std::string make_staging_tag();

// The temporary `.NAME.TAG<suffix>` beside `target` (NAME its file name).
std::string staging_path(const std::filesystem::path& target, const std::string& tag,
                         const std::string& suffix);

// Removes temporaries `.NAME.TAG<suffix>` beside `target` left by jobs that were killed: TAG
// names this host and a process that no longer runs (a job on another host, or one still
// running, keeps its own); also the untagged `.NAME<suffix>` of earlier versions.
void remove_stale_temporaries(const std::filesystem::path& target, const std::string& suffix);

// rename(2) that never replaces what `to` names: -1 with errno EEXIST when it exists
// (renameat2's RENAME_NOREPLACE; where a filesystem lacks it, a check just before renaming).
int rename_no_replace(const std::string& from, const std::string& to);

}  // namespace st
