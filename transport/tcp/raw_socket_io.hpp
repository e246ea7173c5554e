#pragma once
// raw_recv / raw_send: recv(2) and send(2) straight to the kernel (the syscall instruction on
// x86-64, syscall(2) elsewhere), not through glibc's wrappers. Those are
// pthread cancellation points, and glibc switches asynchronous cancellation on and off around
// each (~30 instructions a call, 4 calls a round trip); nothing in rdmarpc cancels threads. Under
// the sanitizers glibc's, which they intercept (ASan checks the buffer, TSan sees the data pass
// through the socket). Same results and errno as recv and send. Layer: transport (tcp).
// Threading: stateless.

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace rdmarpc::transport::tcp {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline ssize_t raw_recv(int fd, void* data, std::size_t size) noexcept {
  return ::recv(fd, data, size, 0);
}
inline ssize_t raw_send(int fd, const void* data, std::size_t size, int flags) noexcept {
  return ::send(fd, data, size, flags);
}
#elif defined(__x86_64__)
// The syscall instruction itself (as musl does): glibc's syscall() is a variadic function that
// shuffles all six argument registers (~20 instructions a call). The kernel answers -errno on
// failure, made into errno and -1 here, as recv and send do.
inline ssize_t raw_socket_call(long number, long fd, const void* data, std::size_t size,
                               long flags) noexcept {
  long result;
  register long no_address __asm__("r8") = 0;
  register long no_length __asm__("r9") = 0;
  register long flags_register __asm__("r10") = flags;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"(number), "D"(fd), "S"(data), "d"(size), "r"(flags_register), "r"(no_address),
                     "r"(no_length)
                   : "rcx", "r11", "memory");
  if (result < 0 && result > -4096) [[unlikely]] {
    errno = static_cast<int>(-result);
    return -1;
  }
  return result;
}
inline ssize_t raw_recv(int fd, void* data, std::size_t size) noexcept {
  return raw_socket_call(SYS_recvfrom, fd, data, size, 0);
}
inline ssize_t raw_send(int fd, const void* data, std::size_t size, int flags) noexcept {
  return raw_socket_call(SYS_sendto, fd, data, size, flags);
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
