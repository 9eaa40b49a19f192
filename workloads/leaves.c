// leaves: a program whose time is in functions without a frame of their own, both called
// from run(), which main() calls: libc's strlen over a long string, and mix(), a leaf that
// keeps its locals in registers. Built as distributions build C with frame pointers
// (-fno-omit-frame-pointer -momit-leaf-frame-pointer: leaves keep none), a walk by frame
// pointers from a sample in either goes from it to main, skipping run. Argument: seconds to
// run (default 5).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LEN (1 << 16)

static char buf[LEN + 1];

__attribute__((noinline)) unsigned long mix(unsigned long x) {
	for (int i = 0; i < 500; i++) x = (x ^ (x >> 7)) * 0x9E3779B97F4A7C15ul + (unsigned long)i;
	return x;
}

__attribute__((noinline)) unsigned long run(unsigned long i) {
	buf[i % LEN] = (char)('a' + (i & 7)); // a string strlen cannot be hoisted over
	return strlen(buf) + mix(i);
}

int main(int argc, char **argv) {
	double secs = argc > 1 ? atof(argv[1]) : 5;
	memset(buf, 'a', LEN);
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	unsigned long acc = 0;
	for (unsigned long i = 0;; i++) {
		acc += run(i);
		if ((i & 255) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 >= secs)
				break;
		}
	}
	printf("%lu\n", acc);
	return 0;
}
