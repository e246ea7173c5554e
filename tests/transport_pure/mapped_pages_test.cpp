// verbs::mapped_pages: whole pages of their own, writable, given back to the kernel when freed.
#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "verbs/handles.hpp"

using rdmarpc::verbs::mapped_pages;

namespace {

std::size_t page_size() {
  return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// mincore fails with ENOMEM exactly when part of the range is not mapped.
bool is_mapped(const void* p, std::size_t bytes) {
  std::vector<unsigned char> residency((bytes + page_size() - 1) / page_size());
  if (::mincore(const_cast<void*>(p), bytes, residency.data()) == 0) return true;
  REQUIRE(errno == ENOMEM);  // not EFAULT/EINVAL: the question was asked right
  return false;
}

}  // namespace

TEST_CASE("mapped_pages: rounds up to whole pages, page-aligned and writable throughout", "[mapped_pages]") {
  const std::size_t page = page_size();
  CHECK(mapped_pages(0).mapped_bytes() == page);
  CHECK(mapped_pages(1).mapped_bytes() == page);
  CHECK(mapped_pages(page).mapped_bytes() == page);
  mapped_pages pages(2 * page + 1);
  REQUIRE(pages);
  CHECK(pages.mapped_bytes() == 3 * page);
  CHECK(reinterpret_cast<std::uintptr_t>(pages.get()) % page == 0);
  for (std::size_t i = 0; i < pages.mapped_bytes(); ++i) pages.get()[i] = std::byte{0x5a};
  CHECK(pages.get()[3 * page - 1] == std::byte{0x5a});
}

TEST_CASE("mapped_pages: freeing unmaps the pages, a move hands them over once", "[mapped_pages]") {
  mapped_pages first(1 << 20);
  std::byte* const data = first.get();
  const std::size_t bytes = first.mapped_bytes();
  REQUIRE(is_mapped(data, bytes));

  mapped_pages second(std::move(first));
  CHECK_FALSE(first);
  CHECK(first.mapped_bytes() == 0);
  CHECK(second.get() == data);
  first.reset();  // empty: unmaps nothing
  CHECK(is_mapped(data, bytes));

  mapped_pages third;
  third = std::move(second);
  CHECK(third.get() == data);
  CHECK(is_mapped(data, bytes));
  third.reset();
  CHECK_FALSE(third);
  CHECK_FALSE(is_mapped(data, bytes));
}

TEST_CASE("mapped_pages: assigning over pages unmaps them, a self-move keeps them", "[mapped_pages]") {
  mapped_pages target(1 << 16);
  std::byte* const old_data = target.get();
  const std::size_t old_bytes = target.mapped_bytes();
  mapped_pages source(1 << 16);
  std::byte* const new_data = source.get();
  target = std::move(source);
  CHECK(target.get() == new_data);
  CHECK_FALSE(is_mapped(old_data, old_bytes));

  mapped_pages& alias = target;
  target = std::move(alias);
  CHECK(target.get() == new_data);
  CHECK(is_mapped(new_data, target.mapped_bytes()));
}

TEST_CASE("mapped_pages: a size no mapping can hold throws bad_alloc", "[mapped_pages]") {
  CHECK_THROWS_AS(mapped_pages(std::size_t(-1)), std::bad_alloc);
  CHECK_THROWS_AS(mapped_pages(std::size_t(-1) - page_size() + 2), std::bad_alloc);
}
