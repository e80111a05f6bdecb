#include "core/staged_folder.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/file_io.hpp"

namespace st {
namespace fs = std::filesystem;

namespace {

std::string parent_of(const fs::path& p) {
  const fs::path parent = p.parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

StagedFolder::StagedFolder(std::string path, std::string what, bool owner, bool replace,
                           std::string how_to_replace)
    : path_(std::move(path)),
      what_(std::move(what)),
      how_to_replace_(std::move(how_to_replace)),
      owner_(owner),
      replace_(replace) {
  fs::path target = fs::absolute(path_).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();  // "dir/" names dir
  target_ = target.string();
  std::string hidden = target.filename().string();
  hidden.insert(hidden.begin(), '.');
  hidden.append(".partial");
  temp_ = (target.parent_path() / hidden).string();
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
  }
  const std::string parent = parent_of(fs::path(temp_));
  fs::create_directories(parent, ec);
  if (ec) fail_input("{}: cannot create '{}': {}", what_, parent, ec.message());
  fs::remove_all(temp_, ec);  // what a killed export left
  if (!fs::create_directory(temp_, ec) || ec)
    fail_input("{}: cannot create '{}': {}", what_, temp_, ec ? ec.message() : "it exists");
  created_ = true;
}

void StagedFolder::commit() {
  if (!owner_ || committed_) return;
  sync_directory(temp_);  // its files were each synced when closed
  std::error_code ec;
  std::string aside;
  if (replace_ && fs::is_directory(target_, ec) && !fs::is_empty(target_, ec)) {
    aside = temp_.substr(0, temp_.size() - std::string(".partial").size()) + ".replaced";
    fs::remove_all(aside, ec);  // what a killed replacement left
    if (::rename(target_.c_str(), aside.c_str()) != 0)
      fail_input("{}: moving the old '{}' aside: {}", what_, path_, std::strerror(errno));
  }
  // rename(2) replaces an empty folder, never one with files (create() checked it is empty).
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    fail_input("{}: renaming '{}' to '{}': {}", what_, temp_, path_, std::strerror(errno));
  committed_ = true;
  if (!aside.empty()) fs::remove_all(aside, ec);
  sync_directory(parent_of(fs::path(target_)));
}

}  // namespace st
