#pragma once
// POSIX file operations for data, checkpoints and exports, each failure an Error naming the
// file and errno.
#include <cstddef>
#include <cstdint>
#include <string>

namespace st {

class OutputFile {
 public:
  enum class Mode { truncate, existing };
  // truncate: create or truncate; existing: open a file that exists for writing in place.
  explicit OutputFile(const std::string& path, Mode mode = Mode::truncate);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  // Appends at the current position.
  void write(const void* data, size_t bytes);
  // Writes at `offset` without moving the position (several ranks may fill one file).
  void write_at(const void* data, size_t bytes, int64_t offset);
  // fsync, then close: the bytes are on disk when this returns.
  void sync_and_close();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
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
// Checks that a file can be written at `path` (its directory exists and takes files, `path` is
// no directory); an InputError saying why not. Leaves nothing behind.
void check_file_writable(const std::string& path);

// fsync of a directory, so renames and creations inside it are durable.
void sync_directory(const std::string& path);
std::string read_text_file(const std::string& path);
// Writes `text` to `path` and fsyncs it.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace st
