// Built against an installed cucore: compiles a kernel (works without a GPU)
// and prints where NVRTC came from.
#include <cucore/cucore.hpp>

#include <cstdio>

int main() {
  auto nvrtc = cucore::pathfinder::find("nvrtc");
  cucore::Program prog("extern \"C\" __global__ void k(int* p) { *p = 42; }", "c++", {.arch = "sm_90"});
  cucore::ObjectCode obj = prog.compile(cucore::CodeType::cubin);
  auto code = obj.code();
  bool elf = code.size() > 4 && code[0] == std::byte{0x7f} && code[1] == std::byte{'E'};
  std::printf("consumer: nvrtc %s from %s; cubin of %zu bytes%s\n", nvrtc.version.c_str(), nvrtc.path.c_str(),
              code.size(), elf ? " (ELF)" : " (NOT ELF)");
  return elf ? 0 : 1;
}
