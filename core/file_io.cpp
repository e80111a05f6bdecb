#include "core/file_io.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/liveness.hpp"

namespace st {

OutputFile::OutputFile(const std::string& path, Mode mode) : path_(path), mode_(mode) {
  if (mode == Mode::through) {
    // Non-blocking open: a FIFO without a reader fails (ENXIO) instead of waiting for one.
    fd_ = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0 && errno == ENXIO)
      fail_input("'{}' is a FIFO that nobody reads; start its reader first", path);
    if (fd_ < 0) fail_io(errno, "cannot open '{}' for writing: {}", path, std::strerror(errno));
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    return;
  }
  const int flags = mode == Mode::truncate ? O_WRONLY | O_CREAT | O_TRUNC : O_WRONLY;
  fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd_ < 0)
    fail_io(errno, "cannot {} '{}': {}", mode == Mode::truncate ? "create" : "open for writing",
            path, std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, size_t bytes) {
  liveness::note_progress();
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_io(errno, "writing '{}': {}", path_, std::strerror(errno));
    p += n;
    bytes -= size_t(n);
  }
}

void OutputFile::write_at(const void* data, size_t bytes, int64_t offset) {
  liveness::note_progress();
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail_io(errno, "writing '{}' at offset {}: {}", path_, offset, std::strerror(errno));
    p += n;
    bytes -= size_t(n);
    offset += n;
  }
}

void OutputFile::reserve(int64_t bytes) {
  const int rc = ::posix_fallocate(fd_, 0, bytes);
  if (rc == 0) return;
  if (rc != EOPNOTSUPP && rc != EINVAL)
    fail_io(rc, "reserving {} bytes for '{}': {}", bytes, path_, std::strerror(rc));
  if (::ftruncate(fd_, bytes) != 0)
    fail_io(errno, "setting the size of '{}' to {} bytes: {}", path_, bytes, std::strerror(errno));
}

void OutputFile::sync_and_close() {
  if (mode_ != Mode::through && ::fsync(fd_) != 0)
    fail_io(errno, "fsync of '{}': {}", path_, std::strerror(errno));
  if (::close(fd_) != 0) fail_io(errno, "closing '{}': {}", path_, std::strerror(errno));
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
  if (::fstat(fd_, &st) != 0) fail_io(errno, "stat of '{}': {}", path_, std::strerror(errno));
  return int64_t(st.st_size);
}

void InputFile::read_at(void* dst, size_t bytes, int64_t offset) const {
  liveness::note_progress();
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

namespace {
// Checks that a file can be created at `path`; an InputError saying why not. Leaves nothing.
void check_file_writable(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail_input("'{}' is a directory, not a file", path);
  const bool existed = std::filesystem::exists(path, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail_input("cannot write '{}': {}", path, std::strerror(errno));
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}
}  // namespace

void ensure_writable_directory(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec || !std::filesystem::is_directory(path))
    fail_input("cannot create directory '{}': {}", path,
               ec ? ec.message() : std::string("a file of that name exists"));
  // Named per process: the ranks of a job may check one shared directory at once.
  check_file_writable(
      (std::filesystem::path(path) / fmt::format(".shardtrain-write-probe-{}", ::getpid()))
          .string());
}

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& what) {
  const std::string path = (std::filesystem::path(dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_input("{}: cannot create '{}': {}", what, path, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EWOULDBLOCK) {
      std::string holder(256, '\0');
      const ssize_t n = ::pread(fd_, holder.data(), holder.size() - 1, 0);
      holder.resize(n > 0 ? size_t(n) : 0);
      while (!holder.empty() && holder.back() == '\n') holder.pop_back();
      ::close(fd_);
      fd_ = -1;
      fail_input("{}: '{}' is in use by another job ({}); give each job its own directory", what,
                 dir, holder.empty() ? "its lock file names no process" : holder);
    }
    ::close(fd_);  // no locks on this file system (ENOLCK, EINVAL): go on unlocked
    fd_ = -1;
    return;
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string holder = fmt::format("pid {} on {}\n", ::getpid(), host);
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, holder.data(), holder.size(), 0) < 0) {
    // The name is only for the message another job prints; the lock is what matters.
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

void flush_standard_output() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int error = errno;
  fail("writing standard output: {}", error ? std::strerror(error) : "an I/O error");
}

void sync_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io(errno, "cannot open directory '{}': {}", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail_io(errno, "fsync of directory '{}': {}", path, std::strerror(errno));
}

const char* file_type_name(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISFIFO(mode)) return "a FIFO";
  return "not a regular file";
}

std::string read_text_file(const std::string& path) {
  struct stat st {};
  const bool known = ::stat(path.c_str(), &st) == 0;  // else InputFile names the error
  if (known && S_ISFIFO(st.st_mode)) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_input("cannot open '{}': {}", path, std::strerror(errno));
    std::string text;
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int error = errno;
        ::close(fd);
        fail_input("reading '{}': {}", path, std::strerror(error));
      }
      if (n == 0) break;
      text.append(buf, size_t(n));
    }
    ::close(fd);
    return text;
  }
  if (known && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
    fail_input("'{}' is {}, not a file that can be read whole", path, file_type_name(st.st_mode));
  InputFile f(path);
  std::string text(size_t(f.size()), '\0');
  if (!text.empty()) f.read_at(text.data(), text.size(), 0);
  return text;
}

std::string read_regular_text_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail_input("'{}' is {}; it must be a regular file", path, file_type_name(st.st_mode));
  return read_text_file(path);
}

void write_text_file(const std::string& path, const std::string& text) {
  OutputFile f(path);
  f.write(text.data(), text.size());
  f.sync_and_close();
}

std::string this_executable() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot find this program's own path (/proc/self/exe): {}", ec.message());
  return exe.string();
}

}  // namespace st
