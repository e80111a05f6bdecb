#pragma once
// A folder a command writes for the user (a model export): its files go into a temporary folder
// beside it (.NAME.TAG.partial, TAG the job's: see make_staging_tag), renamed into place by
// commit(), so the folder appears whole or not at all. The target must be new or an empty
// folder: a folder with files is never merged into (not even one that appears while the job
// writes: commit() refuses it), and replaced only when the caller was asked to (`replace`):
// then the old folder is renamed aside (.NAME.TAG.replaced) once the new one is whole, the new
// one renamed into place, and the old one removed. Missing parent folders are created.
// Refusals are InputErrors naming the output and the path.
#include <string>

namespace st {

class StagedFolder {
 public:
  // `what` names the output in messages ("export --out"). `owner`: the process that creates,
  // commits and (on failure) removes the temporary; the others only write into it.
  // `how_to_replace`: what the user adds to replace an existing folder (said when refusing).
  // `staging_tag`: the job's tag (make_staging_tag), the same on every rank; "" makes one for
  // this process alone.
  StagedFolder(std::string path, std::string what, bool owner, bool replace = false,
               std::string how_to_replace = "", std::string staging_tag = "");
  ~StagedFolder();  // the owner removes an uncommitted temporary with everything in it
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;

  const std::string& path() const { return path_; }
  // `name` inside the temporary folder (where it is written before commit()).
  std::string file(const std::string& name) const;
  // Owner: checks the target and creates the temporary (leftovers of killed runs removed).
  void create();
  // Owner: renames the temporary to the target, durably; an InputError when a folder or file
  // appeared at the path meanwhile (or files in the empty folder it was), left as it is.
  void commit();

 private:
  // Renames the temporary to the target, which is absent or an empty folder.
  void move_into_place();

  std::string path_, what_, target_, temp_, aside_, how_to_replace_;
  bool owner_ = false, replace_ = false, created_ = false, committed_ = false;
};

}  // namespace st
