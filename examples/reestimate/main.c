// Drives score() (score.ll) for the sampling run that produced score.json.
#include <stdio.h>
#include <stdlib.h>

long score(long *v, long *out, long n);

int main(int argc, char **argv) {
	long n = 4096, rounds = argc > 1 ? atol(argv[1]) : 20000;
	long *v = malloc(n * sizeof *v), *out = malloc(n * sizeof *out);
	unsigned long s = 88172645463325252UL;
	for (long i = 0; i < n; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
		v[i] = (long)(s % 2000);
	}
	long total = 0;
	for (long r = 0; r < rounds; r++)
		total += score(v, out, n);
	printf("%ld\n", total);
	return 0;
}
