/* rhythm [SECONDS [PERIOD_NS]]: two functions in turn on a fixed rhythm of the monotonic
 * clock, first_half for the first half of every PERIOD_NS nanoseconds (default 1001001, the
 * interval of a 999 Hz timer) and second_half for the second: equal time in each, in phases
 * that keep step with a sampler firing at that interval. */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) void first_half(long long until) {
	while (now_ns() < until)
		for (int i = 0; i < 500; i++) sink += i;
}

__attribute__((noinline)) void second_half(long long until) {
	while (now_ns() < until)
		for (int i = 0; i < 500; i++) sink ^= i;
}

int main(int argc, char **argv) {
	double seconds = argc > 1 ? atof(argv[1]) : 3;
	long long period = argc > 2 ? atoll(argv[2]) : 1001001; /* 999 Hz */
	long long start = now_ns(), end = start + (long long)(seconds * 1e9);
	for (long long t = start; t < end; t += period) {
		first_half(t + period / 2);
		second_half(t + period);
	}
	return 0;
}
