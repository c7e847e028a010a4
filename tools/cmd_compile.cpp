// `cucore compile FILE.cu`: run-time compilation from the command line, through
// the default program cache unless --no-cache (its keys cover the headers the
// source includes, found as NVRTC finds them: beside the source, then -I).
// Writes the output next to the source (or to -o); a compile error prints the
// compiler's log and exits 1.
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "command.hpp"
#include "files/regular_file.hpp"

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

int run_compile(const CompileArgs& a) {
  std::string source;
  try {
    detail::ReadOptions o;
    o.text = true;
    o.what = "source file";
    source = detail::read_text_file(a.file, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cucore compile: %s\n", e.what());
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
    detail::check_output_path(out);  // before the compile: a FIFO or device is refused, not waited on
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cucore compile: %s\n", e.what());
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
    // Whole or not at all: a full disk leaves the old output as it was.
    detail::write_file_atomically(out, bytes.first(size));
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
  static const std::string file_help = "CUDA C++ source file: a regular file (a symlink to one is followed) of at most " +
                                       std::to_string(detail::kMaxReadFileBytes >> 30) +
                                       " GiB with no NUL byte (the headers it includes: no FIFO, no NUL byte either)";
  cmd->add_option("file", args.file, file_help)->required();
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
  cmd->add_option("-o,--output", args.output,
                  "Output file (default: FILE with the target's extension): a new name or a regular file, replaced "
                  "whole through a temporary file beside it, or left as it was if writing fails");
  cmd->add_flag("--no-cache", args.no_cache, "Compile even if the program cache has the result, and store nothing");
  cmd->callback([&exit_code] { exit_code = run_compile(args); });
}};

}  // namespace
}  // namespace cucore::cli
