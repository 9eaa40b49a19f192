// loop1000: one loop of exactly N (default 1000) iterations, with unrolling and vectorisation
// turned off, so its exact counts are known from the source: the loop body runs N times and
// the back edge is taken N-1 times. The accuracy oracle's tests check that.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) unsigned loop(unsigned n) {
	unsigned s = 0;
#pragma clang loop unroll(disable) vectorize(disable)
	for (unsigned i = 0; i < n; i++) s += (i * i) ^ (s >> 3);
	return s;
}

int main(int argc, char **argv) {
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
	printf("loop %u\n", loop(n));
	return 0;
}
