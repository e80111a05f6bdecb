// Outputs a command writes for the user (core/staged_output), the checkpoint directory's lock
// and the clean-up of interrupted saves: what each does to what a path already names.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include <fmt/format.h>

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/staged_folder.hpp"
#include "core/staged_output.hpp"
#include "temp_dir.hpp"

namespace st {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(StagedOutput, AppearsOnlyWhenCommittedAndLeavesNoTemporary) {
  testing::ScopedTempDir tmp;
  write_text_file(tmp.path("out.txt"), "old");
  {
    StagedOutput out(tmp.path("out.txt"), "--out");
    out.file().write("new", 3);
    EXPECT_EQ(read_text_file(tmp.path("out.txt")), "old");  // not yet
  }  // dropped without commit: a failed command
  EXPECT_EQ(read_text_file(tmp.path("out.txt")), "old");
  EXPECT_EQ(names_in(tmp.dir()), std::vector<std::string>{"out.txt"});
  StagedOutput out(tmp.path("out.txt"), "--out");
  write_output_text(out, "new");
  EXPECT_EQ(read_text_file(tmp.path("out.txt")), "new");
  EXPECT_EQ(names_in(tmp.dir()), std::vector<std::string>{"out.txt"});
}

TEST(StagedOutput, ASymlinkKeepsPointingAtTheFileItNames) {
  testing::ScopedTempDir tmp;
  write_text_file(tmp.path("real.txt"), "old");
  fs::create_symlink("real.txt", tmp.path("link.txt"));
  StagedOutput out(tmp.path("link.txt"), "--out");
  write_output_text(out, "new");
  EXPECT_TRUE(fs::is_symlink(tmp.path("link.txt")));
  EXPECT_EQ(read_text_file(tmp.path("real.txt")), "new");
}

TEST(StagedOutput, DevicesAreWrittenThroughDirectoriesAndReaderlessFifosRefused) {
  testing::ScopedTempDir tmp;
  {
    StagedOutput null("/dev/null", "--out");
    EXPECT_TRUE(null.through());
    write_output_text(null, "discarded");
  }
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_THROW(StagedOutput("/dev/null", "--out", StagedOutput::Targets::regular_only), InputError);
  EXPECT_THROW(StagedOutput(tmp.dir(), "--out"), InputError);
  ASSERT_EQ(::mkfifo(tmp.path("fifo").c_str(), 0644), 0);
  try {
    StagedOutput fifo(tmp.path("fifo"), "metrics.trace");
    FAIL() << "a FIFO nobody reads was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.trace: '" + tmp.path("fifo") +
                                         "' is a FIFO that nobody reads"),
              std::string::npos)
        << e.what();
  }
  // One rule for every output: missing parent folders are created (as checkpoint.dir's are);
  // a parent that is a file is refused, naming it.
  StagedOutput missing_dir(tmp.path("no/such/dir/out.txt"), "--out");
  missing_dir.check_writable();
  EXPECT_TRUE(fs::is_directory(tmp.path("no/such/dir")));
  write_output_text(missing_dir, "x");
  EXPECT_TRUE(fs::is_regular_file(tmp.path("no/such/dir/out.txt")));
  try {
    StagedOutput under_a_file(tmp.path("no/such/dir/out.txt/inner.txt"), "--out");
    under_a_file.check_writable();
    FAIL() << "a parent that is a file was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--out: cannot use '" + tmp.path("no/such/dir/out.txt") +
                                         "/inner.txt': Not a directory"),
              std::string::npos)
        << e.what();
  }
  try {
    StagedOutput under_a_file(tmp.path("a/b.txt"), "--out");
    write_text_file(tmp.path("a"), "a file where the folder would go");
    under_a_file.check_writable();
    FAIL() << "a parent that is a file was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--out: cannot create the folder '" + tmp.path("a")),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(open_log_output(tmp.path("logs/a/metrics.jsonl"), "metrics.file"));
  EXPECT_TRUE(fs::is_regular_file(tmp.path("logs/a/metrics.jsonl")));
}

TEST(StagedOutput, AnExistingFileIsRefusedWhenReplacingMustBeAsked) {
  testing::ScopedTempDir tmp;
  write_text_file(tmp.path("w.safetensors"), "old");
  try {
    StagedOutput refused(tmp.path("w.safetensors"), "export --out",
                         StagedOutput::Targets::regular_only, StagedOutput::Existing::refuse,
                         "add --overwrite");
    FAIL() << "an existing file was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("exists: not replaced (add --overwrite to replace it)"),
              std::string::npos)
        << e.what();
  }
  StagedOutput replaced(tmp.path("w.safetensors"), "export --out");
  write_output_text(replaced, "new");
  EXPECT_EQ(read_text_file(tmp.path("w.safetensors")), "new");
}

TEST(StagedOutput, OutputsCommittedTogetherAppearTogether) {
  testing::ScopedTempDir tmp;
  {
    StagedOutput a(tmp.path("a.bin"), "a"), b(tmp.path("b.bin"), "b");
    a.file().write("a", 1);
    a.file().sync_and_close();
    // b's write fails here (the command throws): neither appears.
  }
  EXPECT_TRUE(names_in(tmp.dir()).empty());
  StagedOutput a(tmp.path("a.bin"), "a"), b(tmp.path("b.bin"), "b");
  a.file().write("a", 1);
  a.file().sync_and_close();
  b.file().write("b", 1);
  b.file().sync_and_close();
  commit_together({&a, &b});
  EXPECT_EQ(names_in(tmp.dir()), (std::vector<std::string>{"a.bin", "b.bin"}));
}

void expect_message(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    FAIL() << "no error; expected one with: " << part;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Two jobs exporting one new file at once: each stages its own temporary, the first to commit
// wins, the second is refused (its file appeared meanwhile) and leaves nothing.
TEST(StagedOutput, TwoJobsStageApartAndTheSecondIsRefusedAtCommit) {
  testing::ScopedTempDir tmp;
  const auto refuse = StagedOutput::Existing::refuse;
  {
    StagedOutput a(tmp.path("w.safetensors"), "export --out", StagedOutput::Targets::regular_only,
                   refuse, "add --overwrite");
    StagedOutput b(tmp.path("w.safetensors"), "export --out", StagedOutput::Targets::regular_only,
                   refuse, "add --overwrite");
    EXPECT_NE(a.write_path(), b.write_path());
    a.file().write("a", 1);
    a.file().sync_and_close();
    b.file().write("b", 1);
    b.file().sync_and_close();
    a.commit();
    expect_message([&] { b.commit(); }, "'" + tmp.path("w.safetensors") + "' appeared while");
  }
  EXPECT_EQ(read_text_file(tmp.path("w.safetensors")), "a");
  EXPECT_EQ(names_in(tmp.dir()), std::vector<std::string>{"w.safetensors"});
}

// A command's outputs appear together: when the second cannot be committed (its file appeared
// meanwhile), the first, already renamed into place, is withdrawn.
TEST(StagedOutput, AFailedCommitWithdrawsTheNewOutputsBeforeIt) {
  testing::ScopedTempDir tmp;
  const auto refuse = StagedOutput::Existing::refuse;
  {
    StagedOutput a(tmp.path("w.safetensors"), "export --out", StagedOutput::Targets::regular_only,
                   refuse);
    StagedOutput b(tmp.path("config.json"), "export's config.json", StagedOutput::Targets::any,
                   refuse);
    write_text_file(a.write_path(), "weights");
    b.file().write("{}", 2);
    b.file().sync_and_close();
    write_text_file(tmp.path("config.json"), "someone else's");
    expect_message([&] { commit_together({&a, &b}); }, "config.json' appeared while");
  }
  EXPECT_EQ(names_in(tmp.dir()), std::vector<std::string>{"config.json"});
  EXPECT_EQ(read_text_file(tmp.path("config.json")), "someone else's");
}

// Two jobs exporting one new folder at once (a folder export's .NAME.partial was shared: one
// failed with ENOENT, the other merged both into 7 files where 4 belong): each stages its own,
// the second to commit is refused and its files go; one that files appeared in is refused too.
TEST(StagedFolder, TwoJobsWritingOneNewFolderNeverMerge) {
  testing::ScopedTempDir tmp;
  const std::string out = tmp.path("hf");
  {
    StagedFolder a(out, "export --out", true), b(out, "export --out", true);
    a.create();
    b.create();
    EXPECT_NE(a.file("x"), b.file("x"));
    write_text_file(a.file("a.json"), "a");
    write_text_file(b.file("b.json"), "b");
    write_text_file(b.file("c.json"), "b");
    a.commit();
    expect_message([&] { b.commit(); }, "'" + out + "' appeared while exporting");
  }
  EXPECT_EQ(names_in(tmp.dir()), std::vector<std::string>{"hf"});
  EXPECT_EQ(names_in(out), std::vector<std::string>{"a.json"});
  fs::create_directory(tmp.path("empty"));
  {
    StagedFolder c(tmp.path("empty"), "export --out", true);
    c.create();
    write_text_file(c.file("c.json"), "c");
    write_text_file(tmp.path("empty/other.txt"), "meanwhile");
    expect_message([&] { c.commit(); }, "appeared while exporting");
  }
  EXPECT_EQ(names_in(tmp.path("empty")), std::vector<std::string>{"other.txt"});
  EXPECT_EQ(names_in(tmp.dir()), (std::vector<std::string>{"empty", "hf"}));
}

// Temporaries left by a killed export (its process gone from this host) are removed when the
// same output is staged again; a running job's, and another host's, are kept.
TEST(StagedFolder, LeftoversOfKilledJobsGoOthersStay) {
  testing::ScopedTempDir tmp;
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // a process that no longer runs
  const std::string dead = fmt::format(".hf.{}.{}.0000abcd", host, child);
  const std::string alive = fmt::format(".hf.{}.{}.0000abcd.partial", host, ::getpid());
  const std::string elsewhere = fmt::format(".hf.not-{}.{}.0000abcd.partial", host, child);
  for (const std::string& name :
       {dead + ".partial", dead + ".replaced", alive, elsewhere, std::string(".hf.partial")})
    fs::create_directories(tmp.path(name + "/x"));
  write_text_file(tmp.path(dead + ".shardtrain-tmp"), "half a file");
  {
    StagedFolder folder(tmp.path("hf"), "export --out", true);
    folder.create();
  }
  StagedOutput file(tmp.path("hf"), "--out");  // a file staged there: its leftovers go too
  std::vector<std::string> kept{alive, elsewhere};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(names_in(tmp.dir()), kept);
}

TEST(DirectoryLock, ASecondHolderIsRefusedWithTheFirstNamed) {
  testing::ScopedTempDir tmp;
  DirectoryLock first(tmp.dir(), "checkpoint.dir");
  try {
    DirectoryLock second(tmp.dir(), "checkpoint.dir");
    FAIL() << "two locks on one directory";
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("is in use by another job (pid " + std::to_string(::getpid())),
        std::string::npos)
        << e.what();
  }
}

TEST(InterruptedSaves, TemporariesGoAndAnInterruptedReplacementIsUndone) {
  testing::ScopedTempDir tmp;
  auto make = [&](const std::string& name, bool complete) {
    fs::create_directories(tmp.path(name));
    write_text_file(tmp.path(name + "/rank-0.bin"), "x");
    if (complete) write_text_file(tmp.path(name + "/COMPLETE"), "complete\n");
  };
  make("step-00000002", true);
  make(".step-00000002.old", true);  // replaced whole: goes
  make(".step-00000004.old", true);  // its replacement was cut short: comes back
  make("step-00000004", false);
  make(".step-00000006.tmp", false);
  make("step-00000008", false);  // incomplete and newest: skipped by a resume, named
  const std::vector<std::string> done = clean_interrupted_saves(tmp.dir());
  EXPECT_EQ(done.size(), 3u);
  EXPECT_EQ(names_in(tmp.dir()),
            (std::vector<std::string>{"step-00000002", "step-00000004", "step-00000008"}));
  EXPECT_TRUE(fs::exists(tmp.path("step-00000004/COMPLETE")));
  EXPECT_EQ(latest_checkpoint(tmp.dir()), tmp.path("step-00000004"));
  const std::vector<std::string> skipped = skipped_incomplete_checkpoints(tmp.dir());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("step-00000008 (no COMPLETE marker"), std::string::npos) << skipped[0];
}

}  // namespace
}  // namespace st
