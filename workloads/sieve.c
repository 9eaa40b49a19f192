// sieve: the sieve of Eratosthenes up to N, repeated. Stresses a tight strided store loop
// nested in a rarely taken outer branch, and a counting loop.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sieve(char *composite, int n) {
	memset(composite, 0, (size_t)n + 1);
	int count = 0;
	for (int i = 2; i <= n; i++) {
		if (composite[i]) continue;
		count++;
		for (long j = (long)i * i; j <= n; j += i) composite[j] = 1;
	}
	return count;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 200000;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	char *c = malloc((size_t)n + 1);
	int total = 0;
	for (int r = 0; r < rounds; r++) total += sieve(c, n - r);
	printf("sieve %d\n", total);
	free(c);
	return 0;
}
