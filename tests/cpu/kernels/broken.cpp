// Does not compile (tests/cpu/cpu_test.cpp: compile errors are data).
#include <tessel/cpu_kernel.hpp>

void broken(const tessel::cpu::kernel_args& a) { undeclared_helper(a); }
