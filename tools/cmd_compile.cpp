// `cucore compile FILE.cu`: run-time compilation from the command line, through
// the default program cache unless --no-cache (or -I, whose headers no key can
// see). Writes the output next to the source (or to -o); a compile error prints
// the compiler's log and exits 1.
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
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

int run_compile(const CompileArgs& a) {
  std::ifstream in(a.file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cucore compile: cannot read '%s'\n", a.file.c_str());
    return 1;
  }
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  ProgramOptions opts;
  // NVRTC names the file in its messages ("saxpy.cu(3): error: ...").
  opts.name = std::filesystem::path(a.file).filename().string();
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

  try {
    const CodeType target = *parse_code_type(a.target);  // CLI11 checked the spelling
    Program program(std::move(source), "c++", std::move(opts));
    ObjectCode code;
    std::optional<bool> hit;
    // Headers found through -I are not part of a cache key (their contents
    // are unseen), so such a compile bypasses the cache rather than risk a
    // stale hit.
    const bool cached = !a.no_cache && a.include_dirs.empty();
    if (!cached) {
      code = program.compile(target, {});
    } else {
      ProgramCache& cache = default_program_cache();
      const auto before = cache.stats().hits;
      code = program.compile(target, {}, &cache);
      hit = cache.stats().hits > before;
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
                program.options().arch.c_str(),
                !hit ? (a.no_cache ? "" : ", not cached: -I headers are not in the key")
                     : *hit ? ", cache hit" : ", compiled and cached");
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
