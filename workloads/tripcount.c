// tripcount: two functions of the same loop, one entered rarely with a long loop, one entered
// often with a short one, so that the trip counts a profile implies (loop count over entry
// count) can be checked against the source. Unrolling and vectorisation are off so that the
// loop body runs exactly the trip count. Arguments: the entries of each and their trips
// (default 2000 100000 1000000 200).
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) unsigned long long_trips(unsigned n, unsigned long s) {
#pragma clang loop unroll(disable) vectorize(disable)
	for (unsigned i = 0; i < n; i++) s += (i * i) ^ (s >> 3);
	return s;
}

__attribute__((noinline)) unsigned long short_trips(unsigned n, unsigned long s) {
#pragma clang loop unroll(disable) vectorize(disable)
	for (unsigned i = 0; i < n; i++) s += (i * i) ^ (s >> 3);
	return s;
}

int main(int argc, char **argv) {
	int long_calls = argc > 1 ? atoi(argv[1]) : 2000;
	unsigned long_n = argc > 2 ? (unsigned)atoi(argv[2]) : 100000;
	int short_calls = argc > 3 ? atoi(argv[3]) : 1000000;
	unsigned short_n = argc > 4 ? (unsigned)atoi(argv[4]) : 200;
	unsigned long s = 0;
	for (int i = 0; i < long_calls; i++) s = long_trips(long_n, s);
	for (int i = 0; i < short_calls; i++) s = short_trips(short_n, s);
	printf("%lu\n", s);
	return 0;
}
