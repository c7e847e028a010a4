#pragma once
// Subcommands of the `cucore` tool register themselves here, one file each.
#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

namespace cucore::cli {

// Adds a subcommand to `app`; the callback it installs runs the command and
// sets `exit_code`.
using Registrar = std::function<void(CLI::App& app, int& exit_code)>;

std::vector<Registrar>& registrars();

struct RegisterCommand {
  explicit RegisterCommand(Registrar r) { registrars().push_back(std::move(r)); }
};

}  // namespace cucore::cli
