#pragma once
// A folder a command writes for the user (a model export): its files go into a temporary folder
// beside it (.NAME.partial), renamed into place by commit(), so the folder appears whole or not
// at all. The target must be new or an empty folder: a folder with files is never merged into,
// and replaced only when the caller was asked to (`replace`): then the old folder is renamed
// aside (.NAME.replaced) once the new one is whole, the new one renamed into place, and the old
// one removed. Missing parent folders are created. Refusals are InputErrors naming the output
// and the path.
#include <string>

namespace st {

class StagedFolder {
 public:
  // `what` names the output in messages ("export --out"). `owner`: the process that creates,
  // commits and (on failure) removes the temporary; the others only write into it.
  // `how_to_replace`: what the user adds to replace an existing folder (said when refusing).
  StagedFolder(std::string path, std::string what, bool owner, bool replace = false,
               std::string how_to_replace = "");
  ~StagedFolder();  // the owner removes an uncommitted temporary with everything in it
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;

  const std::string& path() const { return path_; }
  // `name` inside the temporary folder (where it is written before commit()).
  std::string file(const std::string& name) const;
  // Owner: checks the target and creates the temporary (a leftover of a killed run replaced).
  void create();
  // Owner: renames the temporary to the target, durably.
  void commit();

 private:
  std::string path_, what_, target_, temp_, how_to_replace_;
  bool owner_ = false, replace_ = false, created_ = false, committed_ = false;
};

}  // namespace st
