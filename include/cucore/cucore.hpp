#pragma once
// Everything cucore offers, in one include.
#include <cucore/adaptors.hpp>
#include <cucore/buffer.hpp>
#include <cucore/context.hpp>
#include <cucore/device.hpp>
#include <cucore/errors.hpp>
#include <cucore/event.hpp>
#include <cucore/kernel.hpp>
#include <cucore/launch.hpp>
#include <cucore/linker.hpp>
#include <cucore/memory.hpp>
#include <cucore/object_code.hpp>
#include <cucore/pathfinder.hpp>
#include <cucore/program.hpp>
#include <cucore/program_cache.hpp>
#include <cucore/stream.hpp>
#include <cucore/system.hpp>
