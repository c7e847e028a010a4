// files/regular_file: reads refuse what is not a regular file with a size
// (without blocking on a FIFO or allocating for a sparse giant) and name the
// path; the atomic writer leaves the old file byte for byte when writing fails.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/message_of.hpp"
#include "common/compile_helpers.hpp"
#include "files/regular_file.hpp"

namespace cucore::detail {
namespace {

using cucore::test::in_quotes;

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::span<const std::byte> bytes(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

class RegularFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cucore-regular-file-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path write(const std::string& name, const std::string& content) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  // The names in dir_, sorted: a failed write must leave no temporary behind.
  std::vector<std::string> names() const {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir_)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
  }

  fs::path dir_;
};

// The FileError `fn` throws (a failure if it throws none).
template <class Fn>
FileError error_of(Fn&& fn) {
  try {
    fn();
  } catch (const FileError& e) {
    return e;
  }
  ADD_FAILURE() << "no FileError";
  return FileError(FileError::Kind::open, "", 0, "");
}

TEST_F(RegularFile, ReadsExactlyTheFileAndItsStat) {
  const std::string content("line one\nbinary \x01\x02 end", 22);
  const fs::path f = write("a.txt", content);
  struct stat st{};
  EXPECT_EQ(read_text_file(f, {}, &st), content);
  EXPECT_EQ(static_cast<std::size_t>(st.st_size), content.size());
  const std::vector<std::byte> b = read_binary_file(f);
  ASSERT_EQ(b.size(), content.size());
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(static_cast<char>(b[i]), content[i]) << i;
  EXPECT_EQ(read_text_file(write("empty", "")), "");  // empty is a size, 0
}

TEST_F(RegularFile, TextWithANulByteIsRefusedAtItsOffset) {
  const fs::path f = write("nul.h", std::string("#define A 1\n\0rest", 17));
  EXPECT_EQ(read_text_file(f).size(), 17u);  // binary by default
  ReadOptions o;
  o.text = true;
  o.what = "header";
  FileError e = error_of([&] { read_text_file(f, o); });
  EXPECT_EQ(e.kind(), FileError::Kind::nul_byte);
  EXPECT_EQ(e.path(), f.string());
  EXPECT_EQ(std::string(e.what()), in_quotes(f) + " contains a NUL byte at offset 12; is it a header?");
}

TEST_F(RegularFile, DirectoriesFifosAndDevicesAreRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  fs::create_directories(dir_ / "sub");
  const int rc = test::run_with_timeout([&] {
    int bad = 0;
    for (const auto& [path, kind] : std::vector<std::pair<std::string, std::string>>{
             {(dir_ / "fifo").string(), "is not a regular file (a FIFO)"},
             {(dir_ / "sub").string(), "is a directory, not a file"},
             {"/dev/zero", "is not a regular file (a character device)"}}) {
      try {
        read_binary_file(path);
        bad |= 1;
      } catch (const FileError& e) {
        if (e.kind() != FileError::Kind::not_regular || e.path() != path) bad |= 2;
        if (std::string(e.what()) != in_quotes(path) + " " + kind) bad |= 4;
      }
    }
    return bad;
  });
  EXPECT_EQ(rc, 0) << (rc == -1 ? "hung" : "wrong error");
}

TEST_F(RegularFile, SymlinksAreFollowedUnlessToldNot) {
  const fs::path target = write("real.cu", "int x;\n");
  fs::create_symlink(target, dir_ / "link.cu");
  EXPECT_EQ(read_text_file(dir_ / "link.cu"), "int x;\n");
  ReadOptions o;
  o.follow_symlinks = false;
  FileError e = error_of([&] { read_text_file(dir_ / "link.cu", o); });
  EXPECT_EQ(e.kind(), FileError::Kind::not_regular);
  EXPECT_NE(std::string(e.what()).find("(a symbolic link)"), std::string::npos) << e.what();
  // A link to a FIFO is what it reaches: refused.
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  fs::create_symlink(dir_ / "fifo", dir_ / "to-fifo");
  EXPECT_EQ(error_of([&] { read_text_file(dir_ / "to-fifo"); }).kind(), FileError::Kind::not_regular);
}

TEST_F(RegularFile, ProcFilesHaveNoSizeAndAreRefused) {
  // st_size 0 with contents: read by st_size it would be empty.
  FileError e = error_of([] { read_text_file("/proc/self/status"); });
  EXPECT_EQ(e.kind(), FileError::Kind::no_size);
  EXPECT_EQ(std::string(e.what()),
            "'/proc/self/status' reports a size of 0 but has contents (a /proc or /sys file?): only regular files "
            "with a size are read");
}

TEST_F(RegularFile, MissingAndUnreadableFilesGiveTheErrnoText) {
  FileError e = error_of([&] { read_text_file(dir_ / "absent"); });
  EXPECT_EQ(e.kind(), FileError::Kind::open);
  EXPECT_EQ(e.error_number(), ENOENT);
  EXPECT_EQ(std::string(e.what()), "cannot open '" + (dir_ / "absent").string() + "': No such file or directory");
  // /proc/self/mem reads at offset 0 fail for everyone (root included).
  e = error_of([] { read_binary_file("/proc/self/mem"); });
  EXPECT_EQ(e.kind(), FileError::Kind::read);
  EXPECT_EQ(std::string(e.what()), std::string("cannot read '/proc/self/mem': ") + std::strerror(EIO));
}

TEST_F(RegularFile, ASparseGiantIsRefusedBeforeAnyAllocation) {
  const fs::path f = dir_ / "huge.cu";
  {
    std::ofstream(f, std::ios::binary).put('x');
  }
  fs::resize_file(f, std::uintmax_t(100) << 30);  // 100 GiB, sparse
  FileError e = error_of([&] { read_text_file(f); });
  EXPECT_EQ(e.kind(), FileError::Kind::too_large);
  EXPECT_EQ(std::string(e.what()), in_quotes(f) +
                                       " is 107374182400 bytes (100.0 GiB), over the limit of 4 GiB for a file read whole");
  ReadOptions o;
  o.limit = 4;
  o.what = "header";
  e = error_of([&] { read_text_file(write("five", "12345"), o); });
  EXPECT_EQ(std::string(e.what()), in_quotes(dir_ / "five") + " is 5 bytes, over the limit of 4 bytes for a header read whole");
  EXPECT_EQ(read_text_file(write("four", "1234"), o), "1234");  // the limit itself is allowed
}

TEST_F(RegularFile, AtomicWriteCreatesOrReplacesWhole) {
  const fs::path out = dir_ / "out.bin";
  write_file_atomically(out, bytes("first"));
  EXPECT_EQ(slurp(out), "first");
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(fs::status(out).permissions(), static_cast<fs::perms>(0666 & ~mask));  // as open(2) makes it
  fs::permissions(out, static_cast<fs::perms>(0640));
  write_file_atomically(out, bytes("second, longer"));
  EXPECT_EQ(slurp(out), "second, longer");
  EXPECT_EQ(fs::status(out).permissions(), static_cast<fs::perms>(0640));  // kept
  write_file_atomically(out, bytes(""));
  EXPECT_EQ(slurp(out), "");
  // A name as long as a name may be (255 bytes) still has room for its temporary.
  const std::string longest(255, 'n');
  write_file_atomically(dir_ / longest, bytes("long"));
  EXPECT_EQ(slurp(dir_ / longest), "long");
  EXPECT_EQ(names(), (std::vector<std::string>{longest, "out.bin"}));
}

TEST_F(RegularFile, AtomicWriteRefusesWhatIsNotARegularFile) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  fs::create_directories(dir_ / "sub");
  const fs::path victim = write("victim", "keep me");
  fs::create_symlink(victim, dir_ / "link");
  const int rc = test::run_with_timeout([&] {
    int bad = 0;
    for (const char* name : {"fifo", "sub", "link"}) {
      try {
        write_file_atomically(dir_ / name, bytes("data"));
        bad |= 1;
      } catch (const FileError& e) {
        if (e.kind() != FileError::Kind::not_regular) bad |= 2;
        if (std::string(e.what()).find("cannot write '" + (dir_ / name).string() + "': it is a") != 0) bad |= 4;
      }
    }
    return bad;
  });
  EXPECT_EQ(rc, 0) << (rc == -1 ? "hung" : "wrong error");
  EXPECT_TRUE(fs::is_fifo(dir_ / "fifo"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "link"));
  EXPECT_EQ(slurp(victim), "keep me");
  EXPECT_EQ(names(), (std::vector<std::string>{"fifo", "link", "sub", "victim"}));
  FileError e = error_of([&] { check_output_path("/dev/null"); });
  EXPECT_EQ(std::string(e.what()),
            "cannot write '/dev/null': it is a character device; the output must be a regular file or a new name");
  e = error_of([&] { write_file_atomically(dir_ / "no-such-dir" / "out", bytes("x")); });
  EXPECT_EQ(e.error_number(), ENOENT);
  EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos) << e.what();
}

TEST_F(RegularFile, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  const fs::path out = write("out.bin", "the old contents");
  // A file size limit, as a full disk would: write(2) fails with EFBIG once
  // SIGXFSZ is ignored. In a child, so the limit stays there.
  const int rc = test::run_with_timeout([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{1024, 1024};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 10;
    try {
      write_file_atomically(out, bytes(std::string(4096, 'n')));
      return 1;
    } catch (const FileError& e) {
      if (e.kind() != FileError::Kind::write || e.error_number() != EFBIG) return 2;
      if (std::string(e.what()) != "cannot write '" + out.string() + "': " + std::strerror(EFBIG) + "; '" +
                                       out.string() + "' is left as it was")
        return 3;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(slurp(out), "the old contents");
  EXPECT_EQ(names(), std::vector<std::string>{"out.bin"});
}

}  // namespace
}  // namespace cucore::detail
