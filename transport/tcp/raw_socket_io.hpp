#pragma once
// raw_recv / raw_send: recv(2) and send(2) through syscall(2), not glibc's wrappers. Those are
// pthread cancellation points, and glibc switches asynchronous cancellation on and off around
// each (~30 instructions a call, 4 calls a round trip); nothing in rdmarpc cancels threads. Under
// the sanitizers glibc's, which they intercept (ASan checks the buffer, TSan sees the data pass
// through the socket). Same results and errno as recv and send. Layer: transport (tcp).
// Threading: stateless.

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

namespace rdmarpc::transport::tcp {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline ssize_t raw_recv(int fd, void* data, std::size_t size) noexcept {
  return ::recv(fd, data, size, 0);
}
inline ssize_t raw_send(int fd, const void* data, std::size_t size, int flags) noexcept {
  return ::send(fd, data, size, flags);
}
#else
inline ssize_t raw_recv(int fd, void* data, std::size_t size) noexcept {
  return ::syscall(SYS_recvfrom, fd, data, size, 0, nullptr, nullptr);
}
inline ssize_t raw_send(int fd, const void* data, std::size_t size, int flags) noexcept {
  return ::syscall(SYS_sendto, fd, data, size, flags, nullptr, 0);
}
#endif

}  // namespace rdmarpc::transport::tcp
