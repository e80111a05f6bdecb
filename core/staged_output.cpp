#include "core/staged_output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

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

// The temporary beside `target`: hidden, named after it, the same for every rank (several
// ranks fill one safetensors file), so a crashed earlier attempt's is simply overwritten.
std::string temporary_beside(const fs::path& target) {
  return (target.parent_path() / fmt::format(".{}.shardtrain-tmp", target.filename().string()))
      .string();
}

}  // namespace

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
                           const std::string& how_to_replace)
    : path_(std::move(path)), what_(std::move(what)) {
  if (path_.empty()) fail_input("{}: the output path is empty", what_);
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (errno != ENOENT) fail_input("{}: cannot use '{}': {}", what_, path_, std::strerror(errno));
    if (fs::path(path_).filename().empty())
      fail_input("{}: '{}' names a directory; give the path of a file", what_, path_);
    target_ = fs::absolute(path_).string();
    write_path_ = temporary_beside(target_);
    return;
  }
  if (S_ISREG(st.st_mode)) {
    if (existing == Existing::refuse)
      fail_input("{}: '{}' exists: not replaced{}", what_, path_,
                 how_to_replace.empty() ? "" : " (" + how_to_replace + " to replace it)");
    // Through a symlink, the file it points at is replaced and the link kept.
    target_ = fs::canonical(path_).string();
    write_path_ = temporary_beside(target_);
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
  if (::rename(write_path_.c_str(), target_.c_str()) != 0)
    fail_io(errno, "{}: renaming '{}' to '{}': {}", what_, write_path_, target_,
            std::strerror(errno));
  committed_ = true;
  sync_directory(fs::path(target_).parent_path().string());
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
  for (StagedOutput* o : outputs) o->commit();
}

}  // namespace st
