#include "core/staged_output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "core/error.hpp"

namespace st {
namespace fs = std::filesystem;

namespace {

// A character device or FIFO opened to be written through; its errors name `what`.
std::unique_ptr<OutputFile> open_through(const std::string& path, const std::string& what) {
  try {
    return std::make_unique<OutputFile>(path, OutputFile::Mode::through);
  } catch (const Error& e) {
    fail_input("{}: {}", what, e.what());
  }
}

constexpr const char* kTemporarySuffix = ".shardtrain-tmp";

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "host";
  return std::string(name).substr(0, 64);  // a tag fits a file name, and a rank's broadcast
}

// Whether TAG (HOST.PID.RANDOM) names a process of this host that no longer runs.
bool tag_of_a_dead_process(const std::string& tag) {
  const size_t random_dot = tag.rfind('.');
  if (random_dot == std::string::npos || random_dot == 0) return false;
  const size_t pid_dot = tag.rfind('.', random_dot - 1);
  if (pid_dot == std::string::npos || tag.substr(0, pid_dot) != host_name()) return false;
  const std::string pid = tag.substr(pid_dot + 1, random_dot - pid_dot - 1);
  if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos)
    return false;
  return ::kill(pid_t(std::stol(pid)), 0) != 0 && errno == ESRCH;
}

}  // namespace

std::string make_staging_tag() {
  std::random_device device;
  return fmt::format("{}.{}.{:08x}", host_name(), ::getpid(), uint32_t(device()));
}

std::string staging_path(const fs::path& target, const std::string& tag,
                         const std::string& suffix) {
  return (target.parent_path() / fmt::format(".{}.{}{}", target.filename().string(), tag, suffix))
      .string();
}

void remove_stale_temporaries(const fs::path& target, const std::string& suffix) {
  const std::string prefix = fmt::format(".{}", target.filename().string());
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(target.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() < prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string middle =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    // "" is an earlier version's temporary: untagged, overwritten by the next job then too.
    if (middle.empty() || (middle[0] == '.' && tag_of_a_dead_process(middle.substr(1))))
      fs::remove_all(e.path(), ec);
  }
}

int rename_no_replace(const std::string& from, const std::string& to) {
#ifdef RENAME_NOREPLACE
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return -1;
#endif
  struct stat st {};
  if (::lstat(to.c_str(), &st) == 0) {
    errno = EEXIST;
    return -1;
  }
  return ::rename(from.c_str(), to.c_str());
}

void create_parent_folders(const std::string& path, const std::string& what) {
  const fs::path parent = fs::absolute(path).parent_path();
  std::error_code ec;
  if (fs::is_directory(parent, ec)) return;
  fs::create_directories(parent, ec);
  if (ec || !fs::is_directory(parent))
    fail_input("{}: cannot create the folder '{}' for '{}': {}", what, parent.string(), path,
               ec ? ec.message() : std::string("a file of that name exists"));
}

StagedOutput::StagedOutput(std::string path, std::string what, Targets targets, Existing existing,
                           const std::string& how_to_replace, std::string staging_tag)
    : path_(std::move(path)), what_(std::move(what)) {
  if (path_.empty()) fail_input("{}: the output path is empty", what_);
  if (staging_tag.empty()) staging_tag = make_staging_tag();
  // The temporary beside the target: hidden, named after it and this job (the same for every
  // rank: several fill one safetensors file); what killed jobs left is removed.
  auto stage_beside = [&](const std::string& target) {
    target_ = target;
    write_path_ = staging_path(target_, staging_tag, kTemporarySuffix);
    remove_stale_temporaries(target_, kTemporarySuffix);
  };
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (errno != ENOENT) fail_input("{}: cannot use '{}': {}", what_, path_, std::strerror(errno));
    if (fs::path(path_).filename().empty())
      fail_input("{}: '{}' names a directory; give the path of a file", what_, path_);
    stage_beside(fs::absolute(path_).string());
    no_replace_ = existing == Existing::refuse;
    return;
  }
  if (S_ISREG(st.st_mode)) {
    if (existing == Existing::refuse)
      fail_input("{}: '{}' exists: not replaced{}", what_, path_,
                 how_to_replace.empty() ? "" : " (" + how_to_replace + " to replace it)");
    // Through a symlink, the file it points at is replaced and the link kept.
    stage_beside(fs::canonical(path_).string());
    return;
  }
  const bool streamable = S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode);
  if (streamable && targets == Targets::any) {
    through_ = true;
    write_path_ = path_;
    file_ = open_through(path_, what_);
    return;
  }
  fail_input("{}: '{}' is {}; {}", what_, path_, file_type_name(st.st_mode),
             streamable ? "this output is written at offsets by every rank, so it needs a path "
                          "to a regular file (or a new one)"
                        : "give the path of a regular file (or a new one)");
}

StagedOutput::~StagedOutput() {
  file_.reset();
  if (!through_ && !committed_ && !write_path_.empty()) ::unlink(write_path_.c_str());
}

OutputFile& StagedOutput::file() {
  if (!file_) {
    create_parent_folders(path_, what_);
    file_ = std::make_unique<OutputFile>(write_path_);
  }
  return *file_;
}

void StagedOutput::check_writable() const {
  if (through_) return;
  create_parent_folders(path_, what_);
  struct stat st {};
  if (::lstat(write_path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail_input("{}: cannot write '{}': its temporary '{}' exists and is {}", what_, path_,
               write_path_, file_type_name(st.st_mode));
  const int fd = ::open(write_path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    fail_input("{}: cannot write '{}' (its folder must take new files): {}", what_, path_,
               std::strerror(errno));
  ::close(fd);
  ::unlink(write_path_.c_str());
}

void StagedOutput::commit() {
  if (through_ || committed_) return;
  const int renamed = no_replace_ ? rename_no_replace(write_path_, target_)
                                  : ::rename(write_path_.c_str(), target_.c_str());
  if (renamed != 0 && no_replace_ && errno == EEXIST)
    fail_input("{}: '{}' appeared while this output was written: not replaced", what_, path_);
  if (renamed != 0)
    fail_io(errno, "{}: renaming '{}' to '{}': {}", what_, write_path_, target_,
            std::strerror(errno));
  committed_ = true;
  sync_directory(fs::path(target_).parent_path().string());
}

void StagedOutput::withdraw() {
  if (!committed_ || !no_replace_) return;
  ::unlink(target_.c_str());
  committed_ = false;
}

std::unique_ptr<OutputFile> open_log_output(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) {
    create_parent_folders(path, what);
    try {
      return std::make_unique<OutputFile>(path);
    } catch (const Error& e) {
      fail_input("{}: {}", what, e.what());
    }
  }
  if (!S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
    fail_input("{}: '{}' is {}; give the path of a regular file (or a new one)", what, path,
               file_type_name(st.st_mode));
  return open_through(path, what);
}

void write_output_text(StagedOutput& output, const std::string& text) {
  output.file().write(text.data(), text.size());
  output.file().sync_and_close();
  output.commit();
}

void commit_together(std::initializer_list<StagedOutput*> outputs) {
  for (auto it = outputs.begin(); it != outputs.end(); ++it) {
    try {
      (*it)->commit();
    } catch (...) {
      for (auto done = outputs.begin(); done != it; ++done) (*done)->withdraw();
      throw;
    }
  }
}

}  // namespace st
