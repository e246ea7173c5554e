// The program that carries the test programs' precompiled header (tests/CMakeLists.txt): a test
// program reuses it only when compiled with the same flags, so it is built as a program too.
int main() {
  return 0;
}
