// Program caches (cucore.utils.InMemoryProgramCache / FileStreamProgramCache,
// dict-like as cuda.core's: cache[key] = obj, cache.get(key) -> bytes, str
// keys are UTF-8), make_program_cache_key, and Program.compile(cache=...).
#include <cucore/program_cache.hpp>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <typeinfo>
#include <vector>

#include "program_support.hpp"

namespace cucore::python {
namespace {

using cucore::ProgramCache;

std::string key_arg(nb::handle key) {
  PyObject* k = key.ptr();
  if (PyBytes_Check(k)) return std::string(PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k));
  if (PyByteArray_Check(k)) return std::string(PyByteArray_AS_STRING(k), PyByteArray_GET_SIZE(k));
  if (PyUnicode_Check(k)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(k, &n);
    if (!s) throw nb::python_error();
    return std::string(s, static_cast<std::size_t>(n));
  }
  throw nb::type_error(("cache keys must be bytes or str, got " + std::string(Py_TYPE(k)->tp_name)).c_str());
}

// KeyError(key), the key itself as cuda.core raises it (its args, its str).
[[noreturn]] void raise_key_error(nb::handle key) {
  PyErr_SetObject(PyExc_KeyError, key.ptr());
  throw nb::python_error();
}

// Calls fn with the bytes of a buffer-protocol object, C-contiguous: a strided
// memoryview's elements in order, as bytes(view) gives them (copied only then).
// false when `v` has no buffer.
template <typename F>
bool with_buffer_bytes(nb::handle v, F&& fn) {
  Py_buffer view;
  if (PyObject_GetBuffer(v.ptr(), &view, PyBUF_FULL_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  struct Release {
    Py_buffer* v;
    ~Release() { PyBuffer_Release(v); }
  } rel{&view};
  const auto n = static_cast<std::size_t>(view.len);
  if (PyBuffer_IsContiguous(&view, 'C')) {
    fn(std::span<const std::byte>(static_cast<const std::byte*>(view.buf), n));
    return true;
  }
  std::vector<std::byte> copy(n);
  if (PyBuffer_ToContiguous(copy.data(), &view, view.len, 'C') != 0) throw nb::python_error();
  fn(std::span<const std::byte>(copy));
  return true;
}

nb::bytes code_bytes(const cucore::ObjectCode& o) {
  auto s = o.code();
  return nb::bytes(reinterpret_cast<const char*>(s.data()), s.size());
}

// A store runs without the GIL (a disk cache fsyncs): other threads, a clear()
// among them, go on meanwhile, as they do around cuda.core's file writes.
void store(ProgramCache& c, const std::string& key, std::span<const std::byte> bytes) {
  nb::gil_scoped_release nogil;
  c.put(key, bytes);
}

void put_value(ProgramCache& c, const std::string& key, nb::handle value) {
  if (PyObject_TypeCheck(value.ptr(), g_types.object_code)) {
    const cucore::ObjectCode o = *nb::inst_ptr<cucore::ObjectCode>(value);  // shared: kept while the GIL is off
    if (!o.source_path().empty()) {
      // A path-backed object: the cache keeps the file's bytes, read now.
      std::span<const std::byte> bytes;
      try {
        bytes = o.code();
      } catch (const std::exception& e) {
        PyErr_Format(PyExc_FileNotFoundError,
                     "the cache could not read the file of a path-backed ObjectCode (%s): %s",
                     o.source_path().c_str(), e.what());
        throw nb::python_error();
      }
      store(c, key, bytes);
      return;
    }
    // An object whose bytes are not the code its type says is stored as its
    // bytes, as cuda.core stores any object's (cucore's caches check compiled
    // code structurally, and would refuse it).
    if (!cucore::is_valid_code(o.code_type(), o.code())) {
      store(c, key, o.code());
      return;
    }
    nb::gil_scoped_release nogil;
    c.put(key, o);
    return;
  }
  // The buffer stays exported while the GIL is off: a bytearray cannot be resized meanwhile.
  if (!with_buffer_bytes(value, [&](std::span<const std::byte> bytes) { store(c, key, bytes); }))
    throw nb::type_error(("cache values must be bytes-like or ObjectCode, got " +
                          std::string(Py_TYPE(value.ptr())->tp_name)).c_str());
}

// make_program_cache_key's checks of its arguments, in cuda.core's terms.
constexpr const char* kKeyCodeTypes = "['c++', 'nvvm', 'ptx']";
constexpr const char* kKeyTargetTypes = "['cubin', 'ltoir', 'ptx']";

// A code or target type, lower-cased as cuda.core lower-cases it; anything
// else (None, an int, an unknown name) is cuda.core's ValueError.
std::string key_type_arg(nb::handle v, const char* field, std::initializer_list<const char*> valid,
                         const char* listed) {
  nb::object shown = nb::borrow(v);
  if (PyUnicode_Check(v.ptr())) {
    std::string s = utf8_arg(v, field);
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    for (const char* ok : valid)
      if (s == ok) return s;
    shown = nb::str(s.c_str(), s.size());
  }
  raise_value_error(std::string(field) + "=" + nb::cast<std::string>(nb::repr(shown)) +
                    " is not supported (must be one of " + listed + ")");
}

// The code as bytes: str for every code type; bytes or bytearray for NVVM IR
// alone (as Program takes them).
std::string key_code_arg(nb::handle code, const std::string& type) {
  PyObject* c = code.ptr();
  if (PyUnicode_Check(c)) return utf8_arg(code, "code");
  if (PyBytes_Check(c) || PyByteArray_Check(c)) {
    if (type != "nvvm")
      raise_type_error("code must be str for code_type='" + type +
                       "'; bytes/bytearray are only accepted for code_type='nvvm'");
    if (PyBytes_Check(c)) return std::string(PyBytes_AS_STRING(c), static_cast<std::size_t>(PyBytes_GET_SIZE(c)));
    return std::string(PyByteArray_AS_STRING(c), static_cast<std::size_t>(PyByteArray_GET_SIZE(c)));
  }
  raise_type_error(std::string("code must be str or bytes, got ") + Py_TYPE(c)->tp_name);
}

// NVRTC's name expressions (str or bytes, kept apart: Program records each as
// given). Only "c++" reads them; the other code types ignore whatever is passed.
std::vector<std::string> key_names_arg(nb::handle names, const std::string& type) {
  std::vector<std::string> out;
  if (type != "c++") return out;
  nb::object it = nb::steal(PyObject_GetIter(names.ptr()));
  if (!it.is_valid()) {
    PyErr_Clear();
    raise_type_error(std::string("name_expressions must be a sequence of str or bytes, got ") +
                     Py_TYPE(names.ptr())->tp_name);
  }
  while (nb::object n = nb::steal(PyIter_Next(it.ptr()))) {
    if (PyUnicode_Check(n.ptr())) {
      out.push_back(utf8_arg(n, "name_expressions"));
    } else if (PyBytes_Check(n.ptr())) {
      out.push_back(std::string("\0b", 2) +
                    std::string(PyBytes_AS_STRING(n.ptr()), static_cast<std::size_t>(PyBytes_GET_SIZE(n.ptr()))));
    } else if (PyByteArray_Check(n.ptr())) {
      raise_type_error("name_expressions elements must be str or bytes; bytearray is not accepted because "
                       "Program.compile uses each element as a dict key and bytearray is unhashable");
    } else {
      raise_type_error(std::string("name_expressions elements must be str or bytes; got ") + Py_TYPE(n.ptr())->tp_name);
    }
  }
  if (PyErr_Occurred()) throw nb::python_error();
  return out;
}

// extra_digest: None, or bytes-like (bytes, bytearray, memoryview), which may
// be empty: cuda.core tests `is None`, so b"" is a digest.
std::optional<std::string> key_digest_arg(nb::handle v) {
  if (v.is_none()) return std::nullopt;
  std::optional<std::string> out;
  if (!PyUnicode_Check(v.ptr()) && with_buffer_bytes(v, [&](std::span<const std::byte> b) {
        out.emplace(reinterpret_cast<const char*>(b.data()), b.size());
      }))
    return out;
  raise_type_error(std::string("extra_digest must be bytes-like (bytes, bytearray, memoryview) or None, got ") +
                   Py_TYPE(v.ptr())->tp_name);
}

std::size_t entry_count(ProgramCache& c) {
  if (auto* m = dynamic_cast<cucore::InMemoryProgramCache*>(&c)) return m->entry_count();
  if (auto* f = dynamic_cast<cucore::FileStreamProgramCache*>(&c)) return f->entries().size();
  if (auto* t = dynamic_cast<cucore::TwoLevelProgramCache*>(&c)) return t->disk().entries().size();
  return 0;
}

std::optional<std::size_t> max_size_arg(nb::handle v) {
  if (v.is_none()) return std::nullopt;
  if (PyBool_Check(v.ptr()) || !PyIndex_Check(v.ptr()))
    raise_type_error("max_size_bytes must be an int or None, got " + nb::cast<std::string>(nb::repr(v)));
  nb::object i = nb::steal(PyNumber_Index(v.ptr()));
  if (!i.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (n == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow < 0 || (!overflow && n <= 0))
    throw nb::value_error("max_size_bytes must be positive or None (0 would evict every write)");
  if (overflow > 0) return std::numeric_limits<std::size_t>::max();  // larger than any disk
  return static_cast<std::size_t>(n);
}

bool is_cucore_cache(nb::handle h) { return nb::isinstance<ProgramCache>(h); }

// A mapping-like program cache from Python seen as a ProgramCache: bytes keys,
// compiled bytes (or ObjectCode) values. Called with the GIL released (from
// Program::compile), so each call takes it.
class MappingCache final : public ProgramCache {
 public:
  MappingCache(nb::handle mapping, std::string name) : mapping_(mapping), name_(std::move(name)) {}
  using ProgramCache::put;
  // Program::compile asks by type: raw bytes carry none of their own.
  std::optional<cucore::ObjectCode> get(std::string_view) override { return std::nullopt; }
  std::optional<cucore::ObjectCode> get(std::string_view key, cucore::CodeType type) override {
    return lookup(key, type);
  }
  void put(std::string_view key, const cucore::ObjectCode& code) override {
    nb::gil_scoped_acquire gil;
    mapping_[nb::bytes(key.data(), key.size())] = nb::cast(code);
  }
  bool erase(std::string_view) override { return false; }
  void clear() override {}
  std::size_t size_bytes() const override { return 0; }
  cucore::CacheStats stats() const override { return {}; }

 private:
  std::optional<cucore::ObjectCode> lookup(std::string_view key, cucore::CodeType type) {
    nb::gil_scoped_acquire gil;
    nb::object hit = mapping_.attr("get")(nb::bytes(key.data(), key.size()));
    if (hit.is_none()) return std::nullopt;
    if (PyObject_TypeCheck(hit.ptr(), g_types.object_code)) {
      const auto& o = *nb::inst_ptr<cucore::ObjectCode>(hit);
      if (o.code_type() != type) return std::nullopt;
      return o;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(hit.ptr(), &view, PyBUF_SIMPLE) != 0) throw nb::python_error();
    struct Release {
      Py_buffer* v;
      ~Release() { PyBuffer_Release(v); }
    } release{&view};
    if (view.len <= 0) return std::nullopt;
    std::vector<std::byte> bytes(static_cast<std::size_t>(view.len));
    std::memcpy(bytes.data(), view.buf, bytes.size());
    return cucore::ObjectCode::from_bytes(std::move(bytes), type, name_);
  }
  nb::handle mapping_;
  std::string name_;
};

}  // namespace

nb::object program_compile(PyProgram& p, std::string target_type, nb::handle name_expressions, nb::handle logs,
                           nb::handle cache) {
  if (p.program.is_closed()) cucore::detail::throw_closed("Program", "compile");
  std::vector<std::string> names = name_expressions_arg(name_expressions);
  const cucore::CodeType target = code_type_arg(std::move(target_type), "target_type");
  cucore::ObjectCode result;
  if (cache.is_none()) {
    nb::gil_scoped_release nogil;
    result = p.program.compile(target, names);
  } else if (is_cucore_cache(cache)) {
    ProgramCache* c = nb::inst_ptr<ProgramCache>(cache);
    nb::gil_scoped_release nogil;
    result = p.program.compile(target, names, c);
  } else {
    // Any other mapping-like program cache (a user's ProgramCacheResource, or
    // cuda.core's): keyed as cucore's caches are, holding raw bytes.
    if (!names.empty())
      throw nb::value_error("name_expressions cannot be combined with a foreign cache= (the symbol mapping is not "
                            "stored with the binary)");
    MappingCache mapping(cache, p.program.options().name);
    nb::gil_scoped_release nogil;
    result = p.program.compile(target, names, &mapping);
  }
  if (!logs.is_none() && !result.compile_log().empty()) logs.attr("write")(result.compile_log());
  return nb::cast(std::move(result));
}

// A read: without the GIL where it may wait on the filesystem; an in-memory
// hit is shorter than giving the GIL away and taking it back.
std::optional<cucore::ObjectCode> cache_read(ProgramCache& c, const std::string& k) {
  if (typeid(c) == typeid(cucore::InMemoryProgramCache)) return c.get(k);
  nb::gil_scoped_release nogil;
  return c.get(k);
}

void bind_cache(nb::module_& m) {
  auto base = nb::class_<ProgramCache>(m, "_ProgramCache",
      "Base of program caches: a mapping from keys (bytes, or str as UTF-8) to compiled bytes. Reads return "
      "bytes; writes take bytes-like or an ObjectCode. No __contains__ (check-then-read races between processes): "
      "use get().");
  base.def("__getitem__", [](ProgramCache& c, nb::handle key) {
        std::string k = key_arg(key);
        std::optional<cucore::ObjectCode> o = cache_read(c, k);
        if (!o) raise_key_error(key);
        return code_bytes(*o);
      }, nb::arg("key"))
      .def("get", [](ProgramCache& c, nb::handle key, nb::handle default_) -> nb::object {
        std::string k = key_arg(key);
        std::optional<cucore::ObjectCode> o = cache_read(c, k);
        if (!o) return nb::borrow(default_);
        return code_bytes(*o);
      }, nb::arg("key"), nb::arg("default") = nb::none(), "The stored bytes, or `default`.")
      .def("get_object_code", [](ProgramCache& c, nb::handle key) -> nb::object {
        std::string k = key_arg(key);
        std::optional<cucore::ObjectCode> o = cache_read(c, k);
        if (!o) return nb::none();
        return nb::cast(std::move(*o));
      }, nb::arg("key"), "cucore extra: the entry as an ObjectCode sharing the cache's storage (no copy), or None.")
      .def("__setitem__", [](ProgramCache& c, nb::handle key, nb::handle value) { put_value(c, key_arg(key), value); },
           nb::arg("key"), nb::arg("value"))
      .def("__delitem__", [](ProgramCache& c, nb::handle key) {
        std::string k = key_arg(key);
        bool erased;
        {
          nb::gil_scoped_release nogil;
          erased = c.erase(k);
        }
        if (!erased) raise_key_error(key);
      }, nb::arg("key"))
      .def("__len__", [](ProgramCache& c) { return entry_count(c); }, nb::call_guard<nb::gil_scoped_release>())
      .def("clear", &ProgramCache::clear, nb::call_guard<nb::gil_scoped_release>())
      .def("update", [](nb::handle self, nb::handle items) {
        nb::object it = nb::borrow(items);
        if (nb::hasattr(it, "items")) it = it.attr("items")();
        for (nb::handle kv : it) self.attr("__setitem__")(kv[0], kv[1]);
      }, nb::arg("items"))
      .def("close", [](ProgramCache&) {})
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](ProgramCache&, nb::args) {})
      .def_prop_ro("size_bytes", [](const ProgramCache& c) {
        nb::gil_scoped_release nogil;
        return c.size_bytes();
      })
      .def_prop_ro("stats", [](const ProgramCache& c) {
        cucore::CacheStats s = c.stats();
        nb::dict d;
        d["hits"] = s.hits;
        d["misses"] = s.misses;
        d["evictions"] = s.evictions;
        d["errors"] = s.errors;
        return d;
      }, "cucore extra: {hits, misses, evictions, errors}.");

  nb::class_<cucore::InMemoryProgramCache, ProgramCache>(m, "InMemoryProgramCache",
      "An in-process LRU cache of compiled programs, capped by total bytes (reads refresh recency); thread-safe.",
      nb::is_weak_referenceable())
      .def("__init__", [](cucore::InMemoryProgramCache* self, nb::handle max_size_bytes) {
        new (self) cucore::InMemoryProgramCache(max_size_arg(max_size_bytes));
      }, nb::kw_only(), nb::arg("max_size_bytes") = nb::none())
      .def_prop_ro("max_size_bytes", &cucore::InMemoryProgramCache::max_size_bytes);

  nb::class_<cucore::FileStreamProgramCache, ProgramCache>(m, "FileStreamProgramCache",
      "A persistent cache: one file per key holding the raw binary, written atomically (safe across processes). "
      "Default directory: $XDG_CACHE_HOME/cucore/programs (else ~/.cache/cucore/programs); made now (mode 0700) "
      "and again by a write if removed. max_size_bytes counts other writers' temporary files in flight.",
      nb::is_weak_referenceable())
      .def("__init__", [](cucore::FileStreamProgramCache* self, nb::handle path, nb::handle max_size_bytes) {
        std::filesystem::path p = cucore::FileStreamProgramCache::default_path();
        if (!path.is_none()) p = path_arg(path, "FileStreamProgramCache: path");
        // Made now, as cuda.core's constructor makes it.
        new (self) cucore::FileStreamProgramCache(
            p, cucore::FileStreamProgramCacheOptions{.max_size_bytes = max_size_arg(max_size_bytes),
                                                     .create_directory = true});
      }, nb::arg("path") = nb::none(), nb::kw_only(), nb::arg("max_size_bytes") = nb::none())
      .def_prop_ro("path", [](const cucore::FileStreamProgramCache& c) { return c.path().string(); })
      .def_prop_ro("max_size_bytes", &cucore::FileStreamProgramCache::max_size_bytes)
      .def_prop_ro("usable", &cucore::FileStreamProgramCache::usable)
      .def("entry_path", [](const cucore::FileStreamProgramCache& c, nb::handle key) {
        return c.entry_path(key_arg(key)).string();
      }, nb::arg("key"))
      .def_static("default_path", []() { return cucore::FileStreamProgramCache::default_path().string(); });

  m.def("default_program_cache", []() -> ProgramCache& { return cucore::default_program_cache(); },
        nb::rv_policy::reference, "cucore extra: the process-wide cache (memory in front of disk).");

  m.def("make_program_cache_key", [](nb::handle code, nb::handle code_type, nb::handle options, nb::handle target_type,
                                     nb::handle name_expressions, nb::handle extra_digest) {
        // In cuda.core's order: the types, then (in libcucore) the options, then the code.
        const std::string type = key_type_arg(code_type, "code_type", {"c++", "ptx", "nvvm"}, kKeyCodeTypes);
        const std::string target_name = key_type_arg(target_type, "target_type", {"ptx", "cubin", "ltoir"},
                                                     kKeyTargetTypes);
        const cucore::CodeType target = code_type_arg(target_name, "target_type");
        // extra_sources outside NVVM is refused whatever its value, before the code is read (as cuda.core).
        if (type != "nvvm" && option_given(options, "extra_sources"))
          raise_value_error("make_program_cache_key: extra_sources is only supported for code_type \"nvvm\" "
                            "(Program refuses it for \"" + type + "\")");
        const std::string src = key_code_arg(code, type);
        cucore::ProgramOptions po = program_options(options);
        if (po.arch.empty()) po.arch = "sm_" + cucore::Device::current().arch();  // as Program resolves it
        const std::vector<std::string> names = key_names_arg(name_expressions, type);
        const std::optional<std::string> extra = key_digest_arg(extra_digest);
        // libcucore reads an empty string as unset; cuda.core refuses any value but None for these, so an
        // empty one is refused here with libcucore's words.
        if (type == "c++") {
          std::string side;
          int n_side = 0;
          for (const char* f : {"create_pch", "time", "fdevice_time_trace"})
            if (option_given(options, f)) side += (n_side++ ? ", " : "") + std::string(f);
          if (n_side)
            raise_value_error("make_program_cache_key: " + side + (n_side > 1 ? " write" : " writes") +
                              " a file as a side effect of compiling, which a cache hit would skip: compile "
                              "without a cache");
          if (!extra && ((po.use_pch.empty() && option_given(options, "use_pch")) ||
                         (po.pch_dir.empty() && option_given(options, "pch_dir")))) {
            std::string list;
            auto add = [&](bool set, const char* f) {
              if (set) list += (list.empty() ? "" : ", ") + std::string(f);
            };
            add(!po.include_path.empty(), "include_path");
            add(!po.pre_include.empty(), "pre_include");
            add(po.pch.value_or(false), "pch");
            add(option_given(options, "use_pch"), "use_pch");
            add(option_given(options, "pch_dir"), "pch_dir");
            raise_value_error("make_program_cache_key: options read files the key cannot see (" + list +
                              "): fingerprint those files and pass the digest as extra_digest");
          }
        }
        // Options NVVM refuses: CUDAError, as ProgramOptions.as_bytes("nvvm") raises it (cuda.core renders the
        // flags for the key); after the libdevice check, which cuda.core makes first.
        if (type == "nvvm" && !(po.use_libdevice.value_or(false) && !extra)) {
          if (auto bad = po.unsupported_by_nvvm(); !bad.empty()) {
            std::string list;
            for (const auto& f : bad) list += (list.empty() ? "" : ", ") + f;
            raise_cuda_error("The following options are not supported by NVVM backend: " + list);
          }
        }
        const std::string key =
            extra ? cucore::make_program_cache_key(src, type, po, target, names, cucore::GivenExtraDigest{*extra})
                  : cucore::make_program_cache_key(src, type, po, target, names);
        return nb::bytes(key.data(), key.size());
      }, nb::kw_only(),
      nb::arg("code").none(), nb::arg("code_type").none(), nb::arg("options").none(), nb::arg("target_type").none(),
      nb::arg("name_expressions").none() = nb::tuple(), nb::arg("extra_digest").none() = nb::none(),
      "A 32-byte SHA-256 key over everything that shapes the compiled output (compiler version, code, options as "
      "they reach the compiler, target, name expressions, extra_digest), refused (ValueError) where cuda.core "
      "refuses one.");
}

}  // namespace cucore::python
