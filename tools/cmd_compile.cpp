// `cucore compile FILE.cu`: run-time compilation from the command line, through
// the default program cache unless --no-cache (its keys cover the headers the
// source includes, found as NVRTC finds them: beside the source, then -I).
// Writes the output next to the source (or to -o); a compile error prints the
// compiler's log and exits 1.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "command.hpp"

namespace cucore::cli {
namespace {

struct CompileArgs {
  std::string file;
  std::string arch;
  std::string target = "cubin";
  std::vector<std::string> include_dirs;
  std::vector<std::string> defines;
  std::string std;
  std::string output;
  bool no_cache = false;
};

// The source file's text; "" with `error` set when it cannot be read as one.
std::string read_source(const std::string& file, std::string& error) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = "cannot read '" + file + "': " + std::strerror(errno);
    return {};
  }
  struct stat st;
  std::string text;
  if (::fstat(fd, &st) != 0) {
    error = "cannot read '" + file + "': " + std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    error = "'" + file + "' is a directory, not a source file";
  } else if (!S_ISREG(st.st_mode)) {
    error = "'" + file + "' is not a regular file";
  } else {
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got != text.size()) error = "cannot read '" + file + "': it changed while it was read";
    if (auto nul = text.find('\0'); error.empty() && nul != std::string::npos)
      error = "'" + file + "' contains a NUL byte at offset " + std::to_string(nul) + "; is it a source file?";
  }
  ::close(fd);
  return error.empty() ? text : std::string();
}

int run_compile(const CompileArgs& a) {
  std::string error;
  std::string source = read_source(a.file, error);
  if (!error.empty()) {
    std::fprintf(stderr, "cucore compile: %s\n", error.c_str());
    return 1;
  }

  ProgramOptions opts;
  // The path as given: NVRTC names it in its messages ("dir/saxpy.cu(3): error:
  // ...") and searches its directory for quoted includes, as nvcc does.
  opts.name = a.file;
  opts.arch = a.arch;
  if (opts.arch.empty()) {
    try {
      opts.arch = "sm_" + Device().arch();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cucore compile: no --arch given and no device to take it from (%s); pass --arch, e.g. --arch sm_90\n",
                   e.what());
      return 1;
    }
  }
  opts.std = a.std;
  opts.include_path = a.include_dirs;
  for (const auto& d : a.defines) {
    if (auto eq = d.find('='); eq != std::string::npos)
      opts.define_macro.emplace_back(std::pair(d.substr(0, eq), d.substr(eq + 1)));
    else
      opts.define_macro.emplace_back(d);
  }

  std::filesystem::path out = a.output;
  if (out.empty()) out = std::filesystem::path(a.file).replace_extension("." + a.target);
  std::error_code ec;
  if (std::filesystem::equivalent(out, a.file, ec)) {
    std::fprintf(stderr, "cucore compile: the output '%s' is the source file; choose another with -o\n",
                 out.string().c_str());
    return 1;
  }

  try {
    const CodeType target = *parse_code_type(a.target);  // CLI11 checked the spelling
    Program program(std::move(source), "c++", std::move(opts));
    ObjectCode code;
    std::string cached = "";
    if (a.no_cache) {
      code = program.compile(target, {});
    } else {
      TwoLevelProgramCache& cache = default_two_level_program_cache();
      const CacheStats before = cache.stats(), disk_before = cache.disk().stats();
      code = program.compile(target, {}, &cache);
      const CacheStats after = cache.stats(), disk_after = cache.disk().stats();
      if (after.hits > before.hits)
        cached = ", cache hit";
      else if (after.misses == before.misses)
        cached = ", not cached (see above)";  // its log says why
      else if (disk_after.errors > disk_before.errors)
        cached = ", compiled; storing it in the cache failed (see above)";
      else
        cached = ", compiled and cached";
    }
    auto bytes = code.code();
    std::size_t size = bytes.size();
    // PTX is kept NUL-terminated for the driver; the file is plain text.
    if (code.code_type() == CodeType::ptx && size && bytes[size - 1] == std::byte{0}) --size;
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(size));
    f.close();
    if (!f) {
      std::fprintf(stderr, "cucore compile: cannot write '%s'\n", out.string().c_str());
      return 1;
    }
    if (!code.compile_log().empty()) std::fprintf(stderr, "%s\n", code.compile_log().c_str());
    std::printf("wrote %s (%s, %zu bytes, %s%s)\n", out.string().c_str(), a.target.c_str(), size,
                program.options().arch.c_str(), cached.c_str());
    return 0;
  } catch (const CompileError& e) {
    std::fprintf(stderr, "%s\n", e.log().empty() ? e.what() : e.log().c_str());
    std::fprintf(stderr, "cucore compile: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cucore compile: %s\n", e.what());
    return 1;
  }
}

const RegisterCommand compile{[](CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("compile", "Compile a CUDA C++ file with NVRTC (to cubin, PTX or LTO-IR)");
  static CompileArgs args;  // one compile subcommand per process
  cmd->add_option("file", args.file, "CUDA C++ source file")->required();
  cmd->add_option("--arch", args.arch, "Target architecture, e.g. sm_90 (default: the current device's)");
  cmd->add_option("--target", args.target, "Output kind")->check(CLI::IsMember({"cubin", "ptx", "ltoir"}));
  // One value per -I/-D, so "-I dir file.cu" leaves file.cu to the positional.
  cmd->add_option("-I,--include-path", args.include_dirs, "Add a header search directory")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("-D,--define-macro", args.defines, "Define a macro: NAME or NAME=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--std", args.std, "C++ dialect, e.g. c++17");
  cmd->add_option("-o,--output", args.output, "Output file (default: FILE with the target's extension)");
  cmd->add_flag("--no-cache", args.no_cache, "Compile even if the program cache has the result, and store nothing");
  cmd->callback([&exit_code] { exit_code = run_compile(args); });
}};

}  // namespace
}  // namespace cucore::cli
