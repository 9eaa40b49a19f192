/* A native workload for profd's native-symbol test: three hot functions, two in the PIE
 * executable (one static) and one in a shared library, each called 40 times in a row, tens
 * of milliseconds: a loop that moved from one to the next about every millisecond would
 * keep step with a sampler firing every 1.001 ms (999 Hz), and two samplers started apart
 * would see different phases of it. It starts when a byte (or the end) comes on stdin, so
 * that the samplers can attach first, and runs for argv[1] seconds of CPU time. */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

extern unsigned long native_lib_spin(unsigned long n);

static volatile unsigned long sink;

static __attribute__((noinline)) void native_hot(unsigned long n) {
	for (unsigned long i = 0; i < n; i++)
		sink += i * i;
}

__attribute__((noinline)) void native_warm(unsigned long n) {
	for (unsigned long i = 0; i < n; i++)
		sink ^= i + (i >> 3);
}

static double cpu_seconds(void) {
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	char go;
	if (read(0, &go, 1) < 0)
		return 1;
	seconds += cpu_seconds();
	while (cpu_seconds() < seconds) {
		for (int k = 0; k < 40; k++)
			native_hot(300000);
		for (int k = 0; k < 40; k++)
			native_warm(150000);
		for (int k = 0; k < 40; k++)
			sink += native_lib_spin(60000);
	}
	return 0;
}
