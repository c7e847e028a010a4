"""The option table: the one source of every ProgramOptions and LinkerOptions
field. tools/gen_options.py reads it and writes the C++ aggregates' field lists
(include/cucore/program.hpp, linker.hpp), the X-macro tables the flag
renderers, the Python conversion and the PTX linker translation expand
(src/options/option_fields.inc), and the Python dataclasses' fields, defaults,
types and docstrings (python/cucore/_options.py). Adding an option is one row
here and a rerun of the generator (CTest Options.GeneratedFilesAreCurrent fails
until then). Data only: no logic lives here.

Rows are in cuda.core's field order (the dataclasses' order, which the C++
structs follow).

P(field, type, nvrtc, nvvm, ...): a ProgramOptions field.
L(field, type, nvjitlink, ...): a LinkerOptions field.
  type: str (std::string; Optional[str], empty/None: unset), bool? / int?
    (std::optional; Optional[...]), strs (std::vector<std::string>; a str,
    bytes, os.PathLike or a sequence of them), ints (std::vector<int>; an int
    or a sequence), macros (define_macro), sources (extra_sources), bool (a
    plain bool with a C++ default; Optional[bool] in Python, None: that default).
  nvrtc / nvvm / nvjitlink: "<kind> <flag>", the renderer and the flag it is
    given. NVRTC kinds: none (not a flag), arch ("-arch=sm_90", first), toggle
    (the flag when true), boolean ("flag=true|false" when set), value ("flag=v"
    when set), values ("flag=v" for each entry), macros (define_macro),
    include_paths (include_path, then the toolkit's headers unless
    use_bundled_headers), bundled ("flag=<dir>" when true: the directory
    NVRTC installs its own headers in). libNVVM kinds:
    ignored, unsupported (refused when set), arch ("-arch=compute_90"),
    toggle, digit ("flag=1|0"), opt ("-opt=3|0"). nvJitLink kinds: none, arch,
    toggle, boolean ("=true|false", "=1|0" with link-time optimization),
    value, number ("flag<n>", no '='), values.
  cpp_default / py_default: the initializer when not the type's empty value
    (C++ and Python spelling).
  ptx: how a PTX Program hands the field to its linker (cuda.core's
    translation): copy (the LinkerOptions field of the same name), given (true
    when the field is set); absent: not passed.
  doc: what the field means beyond its name (the C++ comment, the docstring).
  py_note: a note for the Python field only.
"""


def P(field, type, nvrtc, nvvm, **extra):
    return dict(field=field, type=type, nvrtc=nvrtc, nvvm=nvvm, **extra)


def L(field, type, nvjitlink, **extra):
    return dict(field=field, type=type, nvjitlink=nvjitlink, **extra)


PROGRAM_DOC = """Compiler options (cuda.core's field names and order). Unset (None) fields
are not passed; arch=None means the current device's; name=None means
"default_program"."""

LINKER_DOC = """nvJitLink options (cuda.core's field names and order). Unset (None) fields are
not passed; arch=None means the current device's."""

# fmt: off
PROGRAM = [
    P('name', 'str', 'none', 'ignored', cpp_default='"default_program"', py_default='"default_program"', ptx='copy',
      doc="the program's name, in the compiler's messages"),
    P('arch', 'str', 'arch -arch', 'arch -arch', ptx='copy', doc='"sm_90" (or "compute_90"); unset: the current device\'s'),
    P('relocatable_device_code', 'bool?', 'boolean --relocatable-device-code', 'unsupported'),
    P('extensible_whole_program', 'bool?', 'toggle --extensible-whole-program', 'unsupported'),
    P('debug', 'bool?', 'toggle --device-debug', 'toggle -g', ptx='copy'),
    P('lineinfo', 'bool?', 'toggle --generate-line-info', 'unsupported', ptx='copy'),
    P('device_code_optimize', 'bool?', 'toggle --dopt=on', 'opt -opt'),
    P('ptxas_options', 'strs', 'values --ptxas-options', 'unsupported', ptx='copy'),
    P('max_register_count', 'int?', 'value --maxrregcount', 'unsupported', ptx='copy'),
    P('ftz', 'bool?', 'boolean --ftz', 'digit -ftz', ptx='copy'),
    P('prec_sqrt', 'bool?', 'boolean --prec-sqrt', 'digit -prec-sqrt', ptx='copy'),
    P('prec_div', 'bool?', 'boolean --prec-div', 'digit -prec-div', ptx='copy'),
    P('fma', 'bool?', 'boolean --fmad', 'digit -fma', ptx='copy'),
    P('use_fast_math', 'bool?', 'toggle --use_fast_math', 'unsupported'),
    P('extra_device_vectorization', 'bool?', 'toggle --extra-device-vectorization', 'unsupported'),
    P('link_time_optimization', 'bool?', 'toggle --dlink-time-opt', 'ignored', ptx='copy'),
    P('gen_opt_lto', 'bool?', 'toggle --gen-opt-lto', 'unsupported'),
    P('define_macro', 'macros', 'macros --define-macro', 'unsupported', doc='"NAME" or {"NAME", "VALUE"}'),
    P('undefine_macro', 'strs', 'values --undefine-macro', 'unsupported'),
    P('include_path', 'strs', 'include_paths --include-path', 'unsupported'),
    P('use_bundled_headers', 'bool?', 'bundled --use-bundled-headers', 'unsupported', doc="NVRTC's own CUDA and CCCL headers (NVRTC 13.3 and later; older: FeatureUnavailableError), installed by NVRTC on first use in nvrtc-bundled-headers under cucore's cache directory and searched after include_path; the toolkit's headers (use_toolkit_headers) are then not added"),
    P('pre_include', 'strs', 'values --pre-include', 'unsupported'),
    P('no_source_include', 'bool?', 'toggle --no-source-include', 'unsupported'),
    P('std', 'str', 'value --std', 'unsupported', doc='"c++17"; unset: NVRTC\'s default'),
    P('builtin_move_forward', 'bool?', 'boolean --builtin-move-forward', 'unsupported'),
    P('builtin_initializer_list', 'bool?', 'boolean --builtin-initializer-list', 'unsupported'),
    P('disable_warnings', 'bool?', 'toggle --disable-warnings', 'unsupported'),
    P('restrict', 'bool?', 'toggle --restrict', 'unsupported'),
    P('device_as_default_execution_space', 'bool?', 'toggle --device-as-default-execution-space', 'unsupported'),
    P('device_int128', 'bool?', 'toggle --device-int128', 'unsupported'),
    P('optimization_info', 'str', 'value --optimization-info', 'unsupported'),
    P('no_display_error_number', 'bool?', 'toggle --no-display-error-number', 'unsupported'),
    P('diag_error', 'ints', 'values --diag-error', 'unsupported'),
    P('diag_suppress', 'ints', 'values --diag-suppress', 'unsupported'),
    P('diag_warn', 'ints', 'values --diag-warn', 'unsupported'),
    P('brief_diagnostics', 'bool?', 'boolean --brief-diagnostics', 'unsupported'),
    P('time', 'str', 'value --time', 'unsupported', ptx='given', doc='timing output file (a side effect: refused by cache keys)'),
    P('split_compile', 'int?', 'value --split-compile', 'unsupported', ptx='copy'),
    P('fdevice_syntax_only', 'bool?', 'toggle --fdevice-syntax-only', 'unsupported'),
    P('minimal', 'bool?', 'toggle --minimal', 'unsupported'),
    P('no_cache', 'bool?', 'toggle --no-cache', 'ignored', ptx='copy'),
    P('fdevice_time_trace', 'str', 'value --fdevice-time-trace', 'ignored', doc='NVRTC writes a time trace (JSON) to this file (a side effect, like `time`).'),
    P('device_float128', 'bool?', 'toggle --device-float128', 'ignored', doc='sm_100 and later'),
    P('frandom_seed', 'str', 'value --frandom-seed', 'ignored'),
    P('ofast_compile', 'str', 'value --Ofast-compile', 'ignored', doc='"0", "min", "mid" or "max"'),
    P('pch', 'bool?', 'toggle --pch', 'ignored'),
    P('create_pch', 'str', 'value --create-pch', 'ignored'),
    P('use_pch', 'str', 'value --use-pch', 'ignored'),
    P('pch_dir', 'str', 'value --pch-dir', 'ignored'),
    P('pch_verbose', 'bool?', 'boolean --pch-verbose', 'ignored'),
    P('pch_messages', 'bool?', 'boolean --pch-messages', 'ignored'),
    P('instantiate_templates_in_pch', 'bool?', 'boolean --instantiate-templates-in-pch', 'ignored'),
    P('extra_sources', 'sources', 'none', 'ignored', doc="NVVM only: more modules compiled with the program, as (name, NVVM IR text or bitcode); and libdevice (the toolkit's nvvm/libdevice) linked lazily."),
    P('use_libdevice', 'bool?', 'none', 'ignored'),
    P('numba_debug', 'bool?', 'toggle --numba-debug', 'unsupported', doc="Numba's debug-information layout (NVRTC 13.2 and later)"),
    P('use_toolkit_headers', 'bool', 'none', 'ignored', cpp_default='true', doc="Whether the toolkit's headers (CCCL, then the CUDA include directory) are put on the include path, after include_path, so <cuda/std/...>, <cub/...> and <thrust/...> work with no include path given.", py_note='cucore extra: CCCL/CUDA headers on the include path (default on)'),
]

LINKER = [
    L('name', 'str', 'none', cpp_default='"<default linker>"', py_default='"<default linker>"', doc="the linked ObjectCode's name"),
    L('arch', 'str', 'arch -arch', doc='"sm_90"; unset: the current device\'s'),
    L('max_register_count', 'int?', 'value -maxrregcount'),
    L('time', 'bool?', 'toggle -time', doc='timing in the info log'),
    L('verbose', 'bool?', 'toggle -verbose', doc='verbose info log'),
    L('link_time_optimization', 'bool?', 'toggle -lto'),
    L('ptx', 'bool?', 'toggle -ptx', doc='emit PTX (needs link_time_optimization)'),
    L('optimization_level', 'int?', 'number -O', doc='0 or 3'),
    L('debug', 'bool?', 'toggle -g'),
    L('lineinfo', 'bool?', 'toggle -lineinfo'),
    L('ftz', 'bool?', 'boolean -ftz'),
    L('prec_div', 'bool?', 'boolean -prec-div'),
    L('prec_sqrt', 'bool?', 'boolean -prec-sqrt'),
    L('fma', 'bool?', 'boolean -fma'),
    L('kernels_used', 'strs', 'values -kernels-used', doc='the rest may be dropped'),
    L('variables_used', 'strs', 'values -variables-used', doc='the rest may be dropped'),
    L('optimize_unused_variables', 'bool?', 'toggle -optimize-unused-variables'),
    L('ptxas_options', 'strs', 'values -Xptxas'),
    L('split_compile', 'int?', 'value -split-compile', doc='threads; 0: all processors'),
    L('split_compile_extended', 'int?', 'value -split-compile-extended', doc='threads, LTO only; 0: all processors'),
    L('no_cache', 'bool?', 'toggle -no-cache'),
    L('numba_debug', 'bool?', 'toggle -numba-debug', doc="Numba's debug-information layout (newer nvJitLink)"),

]

# The other options types: (python_field, cpp_field), in the dataclasses'
# order; the C++ structs are written by hand (stream.hpp, event.hpp,
# memory.hpp), and tests/cpu/test_option_fields.cpp checks them against these.
PAIRS = {
    "STREAM": [("nonblocking", "nonblocking"), ("priority", "priority")],
    "EVENT": [("timing_enabled", "timing_enabled"), ("blocking_sync", "busy_waited_sync"),
              ("ipc_enabled", "ipc_enabled")],
    "DEVICE_MEMORY_RESOURCE": [("ipc_enabled", "ipc_enabled"), ("max_size", "max_size")],
    "PINNED_MEMORY_RESOURCE": [("ipc_enabled", "ipc_enabled"), ("max_size", "max_size"), ("numa_id", "numa_id")],
    "MANAGED_MEMORY_RESOURCE": [("preferred_location", "preferred_location"),
                                ("preferred_location_type", "preferred_location_type"),
                                ("attach_global", "attach_global")],
}
# fmt: on
