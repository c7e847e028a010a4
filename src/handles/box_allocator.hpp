#pragma once
// make_box: std::allocate_shared with memory recycled per thread. Boxes that
// come and go as fast as the driver makes their objects (streams, events,
// imported pools and their mapped resources, IPC mappings) would otherwise pay
// a malloc and a free each, which cost more than the rest of creating and
// destroying a Stream. A thread keeps at most kKeep blocks of a size; its exit
// returns them. Under AddressSanitizer it is plain operator new, so a use
// after release is reported instead of hidden by reuse.
#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace cucore::detail {

template <std::size_t Size, std::size_t Align>
class Recycler {
 public:
  static void* get() {
    List& l = t_list;
    if (Node* n = l.head) {
      l.head = n->next;
      --l.count;
      return n;
    }
    return ::operator new(Size, std::align_val_t(Align));
  }
  static void put(void* p) noexcept {
    List& l = t_list;
    if (l.count >= kKeep) {
      ::operator delete(p, std::align_val_t(Align));
      return;
    }
    if (!l.reaper_armed) {
      l.reaper_armed = true;
      t_reaper.arm();
    }
    l.head = new (p) Node{l.head};
    ++l.count;
  }

 private:
  static_assert(Size >= sizeof(void*));
  static constexpr unsigned kKeep = 64;
  struct Node {
    Node* next;
  };
  // Trivially destructible, so it stays usable while the thread exits; the
  // reaper (destroyed then) empties it and stops further keeping.
  struct List {
    Node* head = nullptr;
    unsigned count = 0;
    bool reaper_armed = false;
  };
  struct Reaper {
    void arm() noexcept {}
    ~Reaper() {
      List& l = t_list;
      while (Node* n = l.head) {
        l.head = n->next;
        ::operator delete(n, std::align_val_t(Align));
      }
      l.count = kKeep;  // blocks freed from now on go straight back
    }
  };
  static thread_local List t_list;
  static thread_local Reaper t_reaper;
};
template <std::size_t Size, std::size_t Align>
thread_local typename Recycler<Size, Align>::List Recycler<Size, Align>::t_list;
template <std::size_t Size, std::size_t Align>
thread_local typename Recycler<Size, Align>::Reaper Recycler<Size, Align>::t_reaper;

// Under AddressSanitizer (GCC's macro or clang's feature test) boxes come from
// the heap.
#if defined(__SANITIZE_ADDRESS__)
#define CUCORE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUCORE_ASAN 1
#endif
#endif
#ifndef CUCORE_ASAN
#define CUCORE_ASAN 0
#endif

template <typename T>
struct BoxAllocator {
  using value_type = T;
  BoxAllocator() noexcept = default;
  template <typename U>
  BoxAllocator(const BoxAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(std::size_t n) {
#if !CUCORE_ASAN
    if (n == 1) return static_cast<T*>(Recycler<sizeof(T), alignof(T)>::get());
#endif
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(alignof(T))));
  }
  void deallocate(T* p, std::size_t n) noexcept {
#if !CUCORE_ASAN
    if (n == 1) return Recycler<sizeof(T), alignof(T)>::put(p);
#endif
    (void)n;  // unsized: clang declares sized deallocation only with -fsized-deallocation
    ::operator delete(p, std::align_val_t(alignof(T)));
  }
  template <typename U>
  friend bool operator==(const BoxAllocator&, const BoxAllocator<U>&) noexcept {
    return true;
  }
};

// A shared box (one allocation: the object and its counts), from recycled memory.
template <typename Box, typename... Args>
std::shared_ptr<Box> make_box(Args&&... args) {
  return std::allocate_shared<Box>(BoxAllocator<Box>(), std::forward<Args>(args)...);
}

}  // namespace cucore::detail
