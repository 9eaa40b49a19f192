/* Three functions deep, built without frame pointers: the kernel's walk by frame pointers
 * stops at the sampled one; a walk by .eh_frame reaches main and libc's start. Runs for
 * argv[1] seconds; with a second argument, "clock", it reads the clock in a loop instead
 * (clockloop, called from main), so that most samples fall in the vDSO. */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

volatile uint64_t sink;

__attribute__((noinline)) uint64_t leaf(uint64_t n) {
	uint64_t h = n;
	for (int i = 0; i < 2000; i++)
		h = h * 6364136223846793005ULL + (uint64_t)i;
	return h;
}

__attribute__((noinline)) uint64_t middle(uint64_t n) {
	volatile char pad[64];
	pad[0] = (char)n;
	uint64_t s = 0;
	for (int i = 0; i < 100; i++)
		s += leaf(n + (uint64_t)i + (uint64_t)pad[0]);
	return s;
}

__attribute__((noinline)) uint64_t outer(uint64_t n) {
	volatile char pad[128];
	pad[0] = (char)n;
	uint64_t s = 0;
	for (int i = 0; i < 10; i++)
		s ^= middle(n + (uint64_t)i + (uint64_t)pad[0]);
	return s;
}

__attribute__((noinline)) uint64_t clockloop(double secs) {
	struct timespec start, now;
	uint64_t n = 0;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		clock_gettime(CLOCK_MONOTONIC, &now);
		n++;
	} while ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 < secs);
	return n;
}

int main(int argc, char **argv) {
	double secs = argc > 1 ? atof(argv[1]) : 2;
	if (argc > 2) {
		sink = clockloop(secs);
		return 0;
	}
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		sink += outer((uint64_t)argc);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9 < secs);
	return 0;
}
