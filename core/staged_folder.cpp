#include "core/staged_folder.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/staged_output.hpp"

namespace st {
namespace fs = std::filesystem;

namespace {

std::string parent_of(const fs::path& p) {
  const fs::path parent = p.parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// What a model export writes: weights, their index, config.json and the tokenizer's files.
bool written_by_an_export(const fs::directory_entry& e) {
  std::error_code ec;
  if (!e.is_regular_file(ec) || e.is_symlink(ec)) return false;
  const std::string ext = e.path().extension().string();
  return ext == ".safetensors" || ext == ".json" || ext == ".txt" || ext == ".model";
}

// Replacing removes the old folder: only one that holds nothing but an export's files (and
// its config.json), never the folder a command runs in or one above it.
void check_replaceable(const fs::path& target, const std::string& what, const std::string& path) {
  std::error_code ec;
  const fs::path here = fs::current_path(ec);
  const fs::path canonical = fs::canonical(target, ec);
  if (!ec && !here.empty()) {
    const auto [end, _] =
        std::mismatch(canonical.begin(), canonical.end(), here.begin(), here.end());
    if (end == canonical.end())
      fail_input("{}: '{}' is the current folder or holds it: not replaced (name another folder)",
                 what, path);
  }
  bool config = false;
  for (const fs::directory_entry& e : fs::directory_iterator(target, ec)) {
    if (!written_by_an_export(e))
      fail_input(
          "{}: '{}' holds '{}', which no export writes: not replaced, even with --overwrite (name "
          "a new folder, or one holding only an earlier export)",
          what, path, e.path().filename().string());
    config = config || e.path().filename() == "config.json";
  }
  if (ec) fail_input("{}: cannot list '{}': {}", what, path, ec.message());
  if (!config)
    fail_input(
        "{}: '{}' has no config.json: not an earlier export, so not replaced (name a new "
        "folder)",
        what, path);
}

}  // namespace

StagedFolder::StagedFolder(std::string path, std::string what, bool owner, bool replace,
                           std::string how_to_replace, std::string staging_tag)
    : path_(std::move(path)),
      what_(std::move(what)),
      how_to_replace_(std::move(how_to_replace)),
      owner_(owner),
      replace_(replace) {
  fs::path target = fs::absolute(path_).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // "dir/" names dir
  target_ = target.string();
  if (staging_tag.empty()) staging_tag = make_staging_tag();
  temp_ = staging_path(target, staging_tag, ".partial");
  aside_ = staging_path(target, staging_tag, ".replaced");
}

StagedFolder::~StagedFolder() {
  if (!owner_ || !created_ || committed_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

std::string StagedFolder::file(const std::string& name) const {
  return (fs::path(temp_) / name).string();
}

void StagedFolder::create() {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(path_, ec);
  if (fs::exists(status)) {
    if (!fs::is_directory(status))
      fail_input(
          "{}: '{}' exists and is not a folder (a folder export writes a new or empty "
          "folder; name a .safetensors file for one file)",
          what_, path_);
    if (!replace_ && !fs::is_empty(path_, ec))
      fail_input(
          "{}: '{}' is a folder with files in it: not replaced (name a new or empty folder{})",
          what_, path_,
          how_to_replace_.empty() ? "" : ", or " + how_to_replace_ + " to replace it");
    if (replace_ && !fs::is_empty(path_, ec)) check_replaceable(target_, what_, path_);
  }
  const std::string parent = parent_of(fs::path(temp_));
  fs::create_directories(parent, ec);
  if (ec) fail_input("{}: cannot create '{}': {}", what_, parent, ec.message());
  // What killed exports left (each job stages under its own name).
  remove_stale_temporaries(target_, ".partial");
  remove_stale_temporaries(target_, ".replaced");
  if (!fs::create_directory(temp_, ec) || ec)
    fail_input("{}: cannot create '{}': {}", what_, temp_, ec ? ec.message() : "it exists");
  created_ = true;
}

void StagedFolder::commit() {
  if (!owner_ || committed_) return;
  sync_directory(temp_);  // its files were each synced when closed
  std::error_code ec;
  bool moved_aside = false;
  if (replace_ && fs::is_directory(target_, ec) && !fs::is_empty(target_, ec)) {
    check_replaceable(target_, what_, path_);  // again: it may have appeared since create()
    if (::rename(target_.c_str(), aside_.c_str()) != 0)
      fail_io(errno, "{}: moving the old '{}' aside: {}", what_, path_, std::strerror(errno));
    moved_aside = true;
  }
  try {
    move_into_place();
  } catch (...) {
    // The old one back in place; if something took its place meanwhile, it stays aside, named.
    if (moved_aside && rename_no_replace(aside_, target_) != 0)
      fail_io(errno, "{}: the old '{}' could not be moved back (it is kept as '{}'): {}", what_,
              path_, aside_, std::strerror(errno));
    throw;
  }
  committed_ = true;
  if (moved_aside) fs::remove_all(aside_, ec);
  sync_directory(parent_of(fs::path(target_)));
}

void StagedFolder::move_into_place() {
  auto appeared = [&] {
    fail_input("{}: '{}' appeared while exporting (another job writing it?): not replaced", what_,
               path_);
  };
  // An empty folder at the path (create() checked it) is removed first, so that the rename
  // never replaces anything: rmdir(2) fails if files appeared in it.
  struct stat st {};
  const bool empty_folder = ::lstat(target_.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  if (empty_folder && ::rmdir(target_.c_str()) != 0) {
    if (errno == ENOTEMPTY || errno == EEXIST) appeared();
    fail_io(errno, "{}: removing the empty folder '{}': {}", what_, path_, std::strerror(errno));
  }
  if (rename_no_replace(temp_, target_) != 0) {
    const int error = errno;
    if (error == EEXIST || error == ENOTEMPTY) appeared();
    if (empty_folder) ::mkdir(target_.c_str(), st.st_mode & 07777);  // as it was
    fail_io(error, "{}: renaming '{}' to '{}': {}", what_, temp_, path_, std::strerror(error));
  }
}

}  // namespace st
