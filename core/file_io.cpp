#include "core/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace st {

OutputFile::OutputFile(const std::string& path, Mode mode) : path_(path) {
  const int flags = mode == Mode::truncate ? O_WRONLY | O_CREAT | O_TRUNC : O_WRONLY;
  fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd_ < 0)
    fail("cannot {} '{}': {}", mode == Mode::truncate ? "create" : "open for writing", path,
         std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("writing '{}': {}", path_, std::strerror(errno));
    p += n;
    bytes -= size_t(n);
  }
}

void OutputFile::write_at(const void* data, size_t bytes, int64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("writing '{}' at offset {}: {}", path_, offset, std::strerror(errno));
    p += n;
    bytes -= size_t(n);
    offset += n;
  }
}

void OutputFile::sync_and_close() {
  if (::fsync(fd_) != 0) fail("fsync of '{}': {}", path_, std::strerror(errno));
  if (::close(fd_) != 0) fail("closing '{}': {}", path_, std::strerror(errno));
  fd_ = -1;
}

InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail_input("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    fail_input("'{}' is a directory, not a file", path);
  }
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t InputFile::size() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("stat of '{}': {}", path_, std::strerror(errno));
  return int64_t(st.st_size);
}

void InputFile::read_at(void* dst, size_t bytes, int64_t offset) const {
  char* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_input("reading '{}': {}", path_, std::strerror(errno));
    if (n == 0)
      fail_input("'{}' is truncated: {} bytes missing at offset {}", path_, bytes, offset);
    p += n;
    bytes -= size_t(n);
    offset += n;
  }
}

void ensure_writable_directory(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path))
    fail_input("cannot create directory '{}': {}", path,
               ec ? ec.message() : std::string("a file of that name exists"));
  check_file_writable((std::filesystem::path(path) / ".shardtrain-write-probe").string());
}

void check_file_writable(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail_input("'{}' is a directory, not a file", path);
  const bool existed = std::filesystem::exists(path, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail_input("cannot write '{}': {}", path, std::strerror(errno));
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

void sync_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory '{}': {}", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail("fsync of directory '{}': {}", path, std::strerror(errno));
}

std::string read_text_file(const std::string& path) {
  InputFile f(path);
  std::string text(size_t(f.size()), '\0');
  if (!text.empty()) f.read_at(text.data(), text.size(), 0);
  return text;
}

void write_text_file(const std::string& path, const std::string& text) {
  OutputFile f(path);
  f.write(text.data(), text.size());
  f.sync_and_close();
}

}  // namespace st
