// callsites: call sites whose targets only call stacks show. A hot indirect call through a
// table of function pointers, where one target takes nearly every call, and a hot direct call
// to a callee too large for clang to inline without a profile. Argument: iterations (default
// 4000000); prints a checksum.
#include <stdio.h>
#include <stdlib.h>

typedef unsigned long (*op_fn)(unsigned long, unsigned long);

// Each target loops a little, so that a sample in it lands past its prologue, where its
// frame pointer names its caller, far more often than on its first or last instruction.
unsigned long op_mix(unsigned long a, unsigned long b) {
	for (int i = 0; i < 2; i++) a = (a ^ (b >> 7)) * 0x9e3779b97f4a7c15ul + i;
	return a;
}
unsigned long op_add(unsigned long a, unsigned long b) {
	for (int i = 0; i < 2; i++) a = a + b + i;
	return a;
}
unsigned long op_xor(unsigned long a, unsigned long b) {
	for (int i = 0; i < 2; i++) a = a ^ (b << (i + 1));
	return a;
}
unsigned long op_rot(unsigned long a, unsigned long b) {
	for (int i = 0; i < 2; i++) a = (a << 13 | a >> 51) + b + i;
	return a;
}

// Not const: clang must not see through the table.
op_fn ops[4] = {op_mix, op_add, op_xor, op_rot};

#define ROUND(x, y, k) \
	x ^= y >> (k % 29 + 3); \
	x *= 0xff51afd7ed558ccdul + k; \
	y += x ^ (x >> 31); \
	y = y << (k % 17 + 5) | y >> (59 - k % 17);

// digest is large enough that clang -O2 does not inline it without a profile.
unsigned long digest(unsigned long x, unsigned long y) {
	ROUND(x, y, 1) ROUND(x, y, 2) ROUND(x, y, 3) ROUND(x, y, 4) ROUND(x, y, 5)
	ROUND(x, y, 6) ROUND(x, y, 7) ROUND(x, y, 8) ROUND(x, y, 9) ROUND(x, y, 10)
	ROUND(x, y, 11) ROUND(x, y, 12) ROUND(x, y, 13) ROUND(x, y, 14) ROUND(x, y, 15)
	return x ^ y;
}

__attribute__((noinline)) unsigned long drive(long n) {
	unsigned long s = 1, r = 12345;
	for (long i = 0; i < n; i++) {
		r = r * 6364136223846793005ul + 1442695040888963407ul;
		unsigned k = (r >> 59) < 29 ? 0 : 1 + (unsigned)(r >> 59) % 3;
		s = ops[k](s, r);
		s = digest(s, r);
	}
	return s;
}

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 4000000;
	printf("callsites %lu\n", drive(n));
	return 0;
}
