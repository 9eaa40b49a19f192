// callchain: a fixed call chain for the stack tests, main -> outer -> middle -> leaf, where
// leaf does nearly all the work and middle a little of its own. Built with frame pointers
// (-fno-omit-frame-pointer), every sample's chain runs from the JIT code into main. Argument:
// the calls of outer (default 300000).
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) unsigned leaf(unsigned x) {
	for (int i = 0; i < 2000; i++) x = x * 1103515245u + 12345u;
	return x;
}

__attribute__((noinline)) unsigned middle(unsigned x) {
	unsigned y = x;
	for (int i = 0; i < 200; i++) y = (y << 1) ^ (y >> 3) ^ (unsigned)i;
	return leaf(x) ^ leaf(y);
}

__attribute__((noinline)) unsigned outer(unsigned x) { return middle(x) + 1; }

int main(int argc, char **argv) {
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 300000;
	unsigned acc = 0;
	for (unsigned i = 0; i < n; i++) acc += outer(i);
	printf("%u\n", acc);
	return 0;
}
