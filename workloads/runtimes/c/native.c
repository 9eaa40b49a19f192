/* A C workload for profd's how-to on native code: mix_ints, whose loop calls step (which
 * the compiler inlines), and sum_squares, each called in turn on the same array, for the
 * seconds of CPU time argv[1] gives. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { N = 4096 };

static inline unsigned step(unsigned x, unsigned v) {
	x ^= x << 13;
	x ^= x >> 17;
	return x + v;
}

__attribute__((noipa)) unsigned mix_ints(const unsigned *v, int n) {
	unsigned x = 1;
	for (int i = 0; i < n; i++)
		x = step(x, v[i]) * 31;
	return x;
}

__attribute__((noipa)) unsigned long sum_squares(const unsigned *v, int n) {
	unsigned long s = 0;
	for (int i = 0; i < n; i++)
		s += (unsigned long)v[i] * v[i] >> (i & 7);
	return s;
}

static double cpu_seconds(void) {
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	double end = cpu_seconds() + (argc > 1 ? atof(argv[1]) : 5);
	static unsigned v[N];
	for (int i = 0; i < N; i++)
		v[i] = i * 2654435761u;
	unsigned long sink = 0;
	while (cpu_seconds() < end) {
		for (int k = 0; k < 200; k++)
			sink += mix_ints(v, N);
		for (int k = 0; k < 100; k++)
			sink += sum_squares(v, N);
	}
	printf("%lu\n", sink);
	return 0;
}
