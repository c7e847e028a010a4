// Owned file descriptors and their passing over Unix-domain sockets (SCM_RIGHTS).
#include <cucore/ipc.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

namespace cucore {

FileDescriptor::FileDescriptor(int fd) : fd_(fd) {
  if (fd < 0) throw InvalidArgumentError("FileDescriptor: " + std::to_string(fd) + " is not a file descriptor");
}

FileDescriptor FileDescriptor::duplicate(int fd) {
  int d = fd < 0 ? -1 : ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (d < 0) {
    int err = fd < 0 ? EBADF : errno;
    throw SystemError(err, std::generic_category(),
                            "file descriptor " + std::to_string(fd) + " cannot be duplicated (is it still open?)");
  }
  return FileDescriptor(d);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

int FileDescriptor::release() noexcept {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void FileDescriptor::close() noexcept {
  // Linux releases the descriptor even when close reports EINTR: never retry.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

AllocationHandle AllocationHandle::duplicate() const {
  if (is_closed()) detail::throw_closed("AllocationHandle", "duplicate");
  return AllocationHandle(FileDescriptor::duplicate(fd()), uuid_);
}

namespace ipc {
namespace {

[[noreturn]] void socket_error(const char* what) { throw SystemError(errno, std::generic_category(), what); }

}  // namespace

void send_fds(int socket, std::span<const int> fds, std::span<const std::byte> data) {
  if (fds.size() > kMaxFds)
    throw InvalidArgumentError("ipc::send_fds: " + std::to_string(fds.size()) + " descriptors; one message carries " +
                                "at most " + std::to_string(kMaxFds));
  for (int fd : fds)
    if (fd < 0) throw InvalidArgumentError("ipc::send_fds: " + std::to_string(fd) + " is not a file descriptor");
  const std::byte zero{0};
  std::span<const std::byte> body = data.empty() ? std::span<const std::byte>(&zero, 1) : data;

  iovec iov{const_cast<std::byte*>(body.data()), body.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    control.assign(CMSG_SPACE(sizeof(int) * fds.size()), 0);
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do n = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0) socket_error("ipc::send_fds: sendmsg");
  // A stream socket may take the bytes in parts; the descriptors went with the first.
  for (std::size_t sent = static_cast<std::size_t>(n); sent < body.size();) {
    do n = ::send(socket, body.data() + sent, body.size() - sent, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0) socket_error("ipc::send_fds: send");
    sent += static_cast<std::size_t>(n);
  }
}

Received recv_fds(int socket, std::size_t max_fds, std::size_t data_size) {
  if (max_fds > kMaxFds)
    throw InvalidArgumentError("ipc::recv_fds: max_fds " + std::to_string(max_fds) + " is more than a message carries (" +
                                std::to_string(kMaxFds) + ")");
  Received r;
  r.data.resize(data_size ? data_size : 1);
  // Room for one more descriptor than allowed, so a sender of too many is
  // seen (MSG_CTRUNC, or a count past max_fds) rather than silently cut.
  std::vector<char> control(CMSG_SPACE(sizeof(int) * (max_fds + 1)));
  std::size_t got = 0;
  while (got < r.data.size()) {
    iovec iov{r.data.data() + got, r.data.size() - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    ssize_t n;
    do n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0) socket_error("ipc::recv_fds: recvmsg");
    // Own every descriptor that arrived before judging the message: whatever
    // is refused below is then closed, never leaked.
    std::vector<FileDescriptor> arrived;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        arrived.emplace_back(fd);
      }
    }
    if (msg.msg_flags & MSG_TRUNC)
      throw IpcError("ipc::recv_fds: the message was longer than the " + std::to_string(r.data.size()) +
                     " bytes asked for (its tail is lost); all descriptors were closed");
    if (msg.msg_flags & MSG_CTRUNC)
      throw IpcError("ipc::recv_fds: the message carried more file descriptors than max_fds (" +
                     std::to_string(max_fds) + "); all were closed");
    if (!arrived.empty() && got > 0)
      throw IpcError("ipc::recv_fds: file descriptors arrived after the message's first byte (a second message?); "
                     "all were closed");
    for (auto& fd : arrived) r.fds.push_back(std::move(fd));
    if (r.fds.size() > max_fds)
      throw IpcError("ipc::recv_fds: the message carried " + std::to_string(r.fds.size()) +
                     " file descriptors, more than max_fds (" + std::to_string(max_fds) + "); all were closed");
    if (n == 0)
      throw IpcError("ipc::recv_fds: the peer closed the socket after " + std::to_string(got) + " of " +
                     std::to_string(r.data.size()) + " bytes");
    got += static_cast<std::size_t>(n);
  }
  if (data_size == 0) r.data.clear();
  return r;
}

namespace {
constexpr std::size_t kHandleMessage = 1 + 16;  // a flag (UUID follows), the UUID
}

void send_handle(int socket, const AllocationHandle& handle) {
  if (handle.is_closed()) detail::throw_closed("AllocationHandle", "ipc::send_handle");
  std::array<std::byte, kHandleMessage> msg{};
  if (handle.uuid()) {
    msg[0] = std::byte{1};
    std::memcpy(msg.data() + 1, handle.uuid()->data(), 16);
  }
  int fd = handle.fd();
  send_fds(socket, std::span<const int>(&fd, 1), msg);
}

AllocationHandle recv_handle(int socket) {
  Received r = recv_fds(socket, 1, kHandleMessage);
  if (r.fds.size() != 1) throw IpcError("ipc::recv_handle: the message carried no file descriptor");
  auto flag = std::to_integer<std::uint8_t>(r.data[0]);
  if (flag > 1)
    throw IpcError("ipc::recv_handle: the UUID flag byte is " + std::to_string(flag) +
                   " (0 or 1 expected): not a handle message");
  std::optional<Uuid> uuid;
  if (flag) {
    Uuid u;
    std::memcpy(u.data(), r.data.data() + 1, 16);
    uuid = u;
  }
  return AllocationHandle(std::move(r.fds[0]), uuid);
}

}  // namespace ipc
}  // namespace cucore
