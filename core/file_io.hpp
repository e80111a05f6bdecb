#pragma once
// POSIX file operations for data, checkpoints and exports, each failure an Error naming the
// file and errno.
#include <cstddef>
#include <cstdint>
#include <string>

namespace st {

class OutputFile {
 public:
  enum class Mode { truncate, existing, through };
  // truncate: create or truncate; existing: open a file that exists for writing in place;
  // through: a character device or FIFO written as a stream (a FIFO without a reader is an
  // InputError, never a wait; nothing to fsync).
  explicit OutputFile(const std::string& path, Mode mode = Mode::truncate);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  // Appends at the current position.
  void write(const void* data, size_t bytes);
  // Writes at `offset` without moving the position (several ranks may fill one file).
  void write_at(const void* data, size_t bytes, int64_t offset);
  // Allocates the file's blocks up to `bytes` (a full disk fails now, with ENOSPC, rather than
  // at a later write); where the file system cannot, only sets the size.
  void reserve(int64_t bytes);
  // fsync, then close: the bytes are on disk when this returns.
  void sync_and_close();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  Mode mode_;
  int fd_ = -1;
};

class InputFile {
 public:
  explicit InputFile(const std::string& path);  // an InputError if it cannot be opened
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  int64_t size() const;
  // Exactly `bytes` at `offset`, or an InputError naming the file (truncated).
  void read_at(void* dst, size_t bytes, int64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
};

// Creates directory `path` (and its parents) if needed and checks a file can be written in it;
// an InputError saying why not. Leaves nothing behind but the directories.
void ensure_writable_directory(const std::string& path);

// An exclusive lock on directory `dir` for this process's lifetime (flock on `dir`/.lock, which
// names the holder): two jobs never share a checkpoint directory, and what a crashed job left
// in it belongs to no running job once the lock is held. An InputError naming the holder when
// another process has it; where the file system has no locks, a no-op.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir, const std::string& what);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

// Flushes stdout; a failed write (a full disk or a closed pipe behind it) is an Error naming
// standard output, so a command's printed result is never lost in silence.
void flush_standard_output();

// fsync of a directory, so renames and creations inside it are durable.
void sync_directory(const std::string& path);
// A regular file's bytes, or a FIFO's until its writer closes it; anything else (a device such
// as /dev/zero, a directory) is an InputError saying what the path is.
std::string read_text_file(const std::string& path);
// read_text_file for a file that is part of a folder (a model folder's config.json, a
// checkpoint's manifest.json): anything but a regular file is refused at once, naming what it
// is (a FIFO there would block with no writer, a device would never end).
std::string read_regular_text_file(const std::string& path);
// The path of this process's executable (/proc/self/exe): programs beside it are found from it.
std::string this_executable();
// "a directory", "a character device", ... for a stat mode, as messages name paths.
const char* file_type_name(unsigned mode);
// Writes `text` to `path` and fsyncs it.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace st
