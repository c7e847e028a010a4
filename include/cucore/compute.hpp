#pragma once
// Parallel algorithms (cuda.compute's): CUB's kernels built at run time for the
// types, operators and iterators asked for, cached across processes.
#include <cucore/compute/build.hpp>
#include <cucore/compute/iterator.hpp>
#include <cucore/compute/op.hpp>
#include <cucore/compute/reduce.hpp>
#include <cucore/compute/types.hpp>
#include <cucore/compute/histogram.hpp>
#include <cucore/compute/radix_sort.hpp>
#include <cucore/compute/scan.hpp>
#include <cucore/compute/transform.hpp>
