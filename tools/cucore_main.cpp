// The `cucore` command-line tool: doctor, compile, cache, ... (one file per
// subcommand, registered through command.hpp).
#include <cucore/errors.hpp>

#include <cstdio>
#include <exception>

#include "command.hpp"

namespace cucore::cli {
std::vector<Registrar>& registrars() {
  static std::vector<Registrar> r;
  return r;
}
}  // namespace cucore::cli

int main(int argc, char** argv) {
  CLI::App app{"cucore: CUDA devices, compilation and caches from the command line"};
  app.require_subcommand(1);
  app.set_version_flag("--version", CUCORE_VERSION_STRING);
  int exit_code = 0;
  for (auto& r : cucore::cli::registrars()) r(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cucore: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
