// ObjectCode factories and accessors: bytes are copied, files are read at once,
// missing or unreadable files name their path, PTX is kept NUL-terminated.
#include <gtest/gtest.h>

#include <cucore/object_code.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/message_of.hpp"
#include "common/compile_helpers.hpp"

namespace fs = std::filesystem;
using cucore::CodeType;

namespace {

using cucore::test::in_quotes;

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> v(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) v[i] = static_cast<std::byte>(s[i]);
  return v;
}

std::string text_of(std::span<const std::byte> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("cucore_objcode_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, std::string_view content) const {
    fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  fs::path path_;
};

using cucore::ObjectCode;
using BytesFactory = ObjectCode (*)(std::span<const std::byte>, std::string, std::map<std::string, std::string>);
using FileFactory = ObjectCode (*)(const fs::path&, std::string, std::map<std::string, std::string>);

struct Factory {
  const char* code_type;
  BytesFactory from_bytes;
  FileFactory from_file;
};

const Factory kFactories[] = {
    {"cubin", &ObjectCode::from_cubin, &ObjectCode::from_cubin},
    {"ptx", &ObjectCode::from_ptx, &ObjectCode::from_ptx},
    {"ltoir", &ObjectCode::from_ltoir, &ObjectCode::from_ltoir},
    {"fatbin", &ObjectCode::from_fatbin, &ObjectCode::from_fatbin},
    {"object", &ObjectCode::from_object, &ObjectCode::from_object},
    {"library", &ObjectCode::from_library, &ObjectCode::from_library},
};

}  // namespace

TEST(ObjectCode, DefaultIsEmpty) {
  ObjectCode c;
  EXPECT_FALSE(c);
  EXPECT_TRUE(c.code().empty());
  EXPECT_EQ(c.code_type(), CodeType::cubin);  // as documented for an empty one
  EXPECT_EQ(c.name(), "");
  EXPECT_TRUE(c.symbol_mapping().empty());
  EXPECT_EQ(c.compile_log(), "");
}

TEST(ObjectCode, EachFactoryFromBytesCopiesAndKeepsItsType) {
  for (const auto& f : kFactories) {
    SCOPED_TRACE(f.code_type);
    std::vector<std::byte> src = bytes_of("\x7f" "ELF-ish payload");
    ObjectCode c = f.from_bytes(src, "mine", {{"k<int>", "_Z1kIiEvv"}});
    ASSERT_TRUE(c);
    EXPECT_EQ(cucore::to_string(c.code_type()), f.code_type);
    EXPECT_EQ(c.name(), "mine");
    ASSERT_EQ(c.symbol_mapping().size(), 1u);
    EXPECT_EQ(c.symbol_mapping().at("k<int>"), "_Z1kIiEvv");
    const std::string before = text_of(c.code());
    src[1] = std::byte{'X'};  // the object owns a copy
    EXPECT_EQ(text_of(c.code()), before);
    EXPECT_EQ(before.substr(0, 16), "\x7f" "ELF-ish payload");
  }
}

TEST(ObjectCode, EachFactoryFromFileReadsIt) {
  TempDir dir;
  const std::string payload("\x7f" "ELF\x02\x01\x01\0\0binary\0bytes", 20);
  const fs::path file = dir.write("k.bin", payload);
  for (const auto& f : kFactories) {
    SCOPED_TRACE(f.code_type);
    ObjectCode c = f.from_file(file, {}, {});
    EXPECT_EQ(cucore::to_string(c.code_type()), f.code_type);
    EXPECT_EQ(c.name(), "k.bin");  // a file's name by default
    std::string got = text_of(c.code());
    if (std::string(f.code_type) == "ptx") {
      ASSERT_FALSE(got.empty());
      EXPECT_EQ(got.back(), '\0');
      got.pop_back();  // PTX gains the NUL the driver needs
    }
    EXPECT_EQ(got, payload);
    EXPECT_EQ(f.from_file(file, "given", {}).name(), "given");
  }
}

TEST(ObjectCode, MissingFileThrowsNamingThePath) {
  TempDir dir;
  const fs::path missing = dir.path() / "no_such_kernel.cubin";
  for (const auto& f : kFactories) {
    SCOPED_TRACE(f.code_type);
    try {
      f.from_file(missing, {}, {});
      FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
    }
  }
}

TEST(ObjectCode, DirectoryAndEmptyFileAreRefused) {
  TempDir dir;
  try {
    ObjectCode::from_cubin(dir.path());
    FAIL() << "a directory was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos) << e.what();
  }
  const fs::path empty = dir.write("empty.cubin", "");
  try {
    ObjectCode::from_cubin(empty);
    FAIL() << "an empty file was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("empty.cubin"), std::string::npos) << e.what();
  }
}

TEST(ObjectCode, UnreadableFileThrowsNamingThePath) {
  TempDir dir;
  fs::path file = dir.write("secret.cubin", "data");
  fs::permissions(file, fs::perms::none);
  // Root reads any file; /proc/self/mem fails to read at offset 0 for everyone.
  if (::geteuid() == 0) file = "/proc/self/mem";
  try {
    ObjectCode::from_cubin(file);
    FAIL() << "an unreadable file was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
}

TEST(ObjectCode, EmptyBytesAndUnknownTypesAreRefused) {
  EXPECT_THROW(ObjectCode::from_cubin(std::span<const std::byte>{}), std::invalid_argument);
  EXPECT_THROW(ObjectCode::from_bytes({}, CodeType::cubin), std::invalid_argument);
  EXPECT_THROW(ObjectCode::from_bytes(bytes_of("x"), static_cast<CodeType>(17)), std::invalid_argument);
}

TEST(ObjectCode, CodeTypesRoundTripThroughTheirNames) {
  const std::vector<std::pair<CodeType, std::string>> all = {
      {CodeType::cubin, "cubin"},   {CodeType::ptx, "ptx"},       {CodeType::ltoir, "ltoir"},
      {CodeType::fatbin, "fatbin"}, {CodeType::object, "object"}, {CodeType::library, "library"}};
  for (const auto& [type, name] : all) {
    EXPECT_EQ(cucore::to_string(type), name);
    EXPECT_EQ(cucore::parse_code_type(name), type);
  }
  for (const char* other : {"", "sass", "CUBIN", "cubin ", "c++", "nvvm"})
    EXPECT_EQ(cucore::parse_code_type(other), std::nullopt) << other;
}

TEST(ObjectCode, PtxTextOverloadsAreTextAndNulTerminated) {
  const std::string ptx = ".version 8.0\n.target sm_90\n";
  for (const ObjectCode& c : {ObjectCode::from_ptx(ptx), ObjectCode::from_ptx(".version 8.0\n.target sm_90\n"),
                              ObjectCode::from_ptx(std::string_view(ptx))}) {
    EXPECT_EQ(c.code_type(), CodeType::ptx);
    ASSERT_EQ(c.code().size(), ptx.size() + 1);
    EXPECT_EQ(text_of(c.code()), ptx + '\0');
  }
  // Already terminated: not terminated twice.
  auto c = ObjectCode::from_bytes(bytes_of(std::string_view(ptx.c_str(), ptx.size() + 1)), CodeType::ptx);
  EXPECT_EQ(c.code().size(), ptx.size() + 1);
}

TEST(ObjectCode, FromBytesKeepsLogAndCopiesShareState) {
  ObjectCode a = ObjectCode::from_bytes(bytes_of("\x7f" "ELF"), CodeType::cubin, "n", {}, "warning: x");
  EXPECT_EQ(a.compile_log(), "warning: x");
  ObjectCode b = a;
  EXPECT_EQ(a.state().get(), b.state().get());
  EXPECT_EQ(b.code().data(), a.code().data());  // shared, not copied
}

// A FIFO in place of a code file: refused at once, never opened for a blocking
// read, by the eager factories and by a path-backed object's first read.
TEST(ObjectCode, AFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir.path() / "k.cubin";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int rc = cucore::test::run_with_timeout([&] {
    int bad = 0;
    auto check = [&](const std::function<void()>& fn, int bit) {
      try {
        fn();
        bad |= bit;
      } catch (const std::invalid_argument& e) {
        if (std::string(e.what()).find(in_quotes(fifo) + " is not a regular file (a FIFO)") == std::string::npos)
          bad |= 128;  // an exit status has 8 bits: one for any wrong message
      }
    };
    int bit = 1;
    for (const auto& f : kFactories) check([&] { f.from_file(fifo, {}, {}); }, bit <<= 1);
    check([&] { (void)ObjectCode::from_path(CodeType::ptx, fifo).code(); }, 1);
    return bad;
  });
  EXPECT_EQ(rc, 0) << (rc == -1 ? "hung on the FIFO" : "no error naming the FIFO");
}

// A /proc file reports a size of 0, a sparse file any size: neither is read as
// what it claims (empty code, or a 100 GiB allocation).
TEST(ObjectCode, ProcFilesAndSparseGiantsAreRefusedByName) {
  try {
    ObjectCode::from_cubin(fs::path("/proc/self/status"));
    FAIL() << "a /proc file was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "ObjectCode::from_cubin: '/proc/self/status' reports a size of 0 but has contents "
                                     "(a /proc or /sys file?): only regular files with a size are read");
  }
  TempDir dir;
  const fs::path huge = dir.write("huge.fatbin", "x");
  fs::resize_file(huge, std::uintmax_t(100) << 30);
  try {
    ObjectCode::from_fatbin(huge);
    FAIL() << "a 100 GiB file was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "ObjectCode::from_fatbin: '" + huge.string() +
                                         "' is 107374182400 bytes (100.0 GiB), over the limit of 4 GiB for a code "
                                         "file read whole");
  }
}
