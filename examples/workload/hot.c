/*
 * profd's demo workload: a program with several hot functions of different weights, meant to
 * be compiled to IR (clang-14 -O2 -g -fdebug-info-for-profiling -S -emit-llvm) and run by
 * lli-14 -jit-kind=mcjit, so that all of its code is JIT code.
 *
 * Usage: lli-14 -jit-kind=mcjit hot.ll [rounds] [flush-every]
 *
 * Every flush-every rounds it asks profd for a flush the way a JIT runtime does: it reads
 * profd's pid from $PROFD_DIR/profd.pid (default /run/profd/profd.pid) and sends it SIGUSR1.
 * With no profd running it just runs.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

enum { SIEVE_N = 2000000, MAT_N = 100, HASH_WORDS = 65536, SORT_N = 3000 };

static unsigned char composite[SIEVE_N + 1];
static double mat_a[MAT_N][MAT_N], mat_b[MAT_N][MAT_N], mat_c[MAT_N][MAT_N];
static char words[HASH_WORDS][16];
static int sort_buf[SORT_N];

/* Counts the primes up to n with the sieve of Eratosthenes. */
NOINLINE unsigned sieve(unsigned n) {
	memset(composite, 0, n + 1);
	unsigned count = 0;
	for (unsigned i = 2; i <= n; i++) {
		if (composite[i])
			continue;
		count++;
		for (unsigned long j = (unsigned long)i * i; j <= n; j += i)
			composite[j] = 1;
	}
	return count;
}

/* Multiplies two MAT_N x MAT_N matrices, returning the trace of the product. */
NOINLINE double matmul(void) {
	for (int i = 0; i < MAT_N; i++)
		for (int j = 0; j < MAT_N; j++) {
			double sum = 0;
			for (int k = 0; k < MAT_N; k++)
				sum += mat_a[i][k] * mat_b[k][j];
			mat_c[i][j] = sum;
		}
	double trace = 0;
	for (int i = 0; i < MAT_N; i++)
		trace += mat_c[i][i];
	return trace;
}

/* FNV-1a over every word; words with an odd hash are hashed twice. */
NOINLINE unsigned long hash_words(void) {
	unsigned long total = 0;
	for (int w = 0; w < HASH_WORDS; w++) {
		unsigned long h = 1469598103934665603UL;
		for (const char *p = words[w]; *p; p++)
			h = (h ^ (unsigned char)*p) * 1099511628211UL;
		if (h & 1)
			for (const char *p = words[w]; *p; p++)
				h = (h ^ (unsigned char)*p) * 1099511628211UL;
		total += h;
	}
	return total;
}

/* Insertion sort of a pseudo-random array; returns its median. */
NOINLINE int sort_ints(unsigned seed) {
	for (int i = 0; i < SORT_N; i++) {
		seed = seed * 1103515245u + 12345u;
		sort_buf[i] = (int)(seed >> 8);
	}
	for (int i = 1; i < SORT_N; i++) {
		int v = sort_buf[i], j = i - 1;
		while (j >= 0 && sort_buf[j] > v) {
			sort_buf[j + 1] = sort_buf[j];
			j--;
		}
		sort_buf[j + 1] = v;
	}
	return sort_buf[SORT_N / 2];
}

static void setup(void) {
	for (int i = 0; i < MAT_N; i++)
		for (int j = 0; j < MAT_N; j++) {
			mat_a[i][j] = (double)(i + j) / MAT_N;
			mat_b[i][j] = (double)(i - j) / MAT_N;
		}
	for (int w = 0; w < HASH_WORDS; w++)
		snprintf(words[w], sizeof words[w], "word%07d", w * 7919);
}

/* Asks profd for a flush: SIGUSR1 to the pid in its pid file. */
static void request_flush(void) {
	const char *dir = getenv("PROFD_DIR");
	char path[512];
	snprintf(path, sizeof path, "%s/profd.pid", dir ? dir : "/run/profd");
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	int pid = 0;
	if (fscanf(f, "%d", &pid) == 1 && pid > 0)
		kill(pid, SIGUSR1);
	fclose(f);
}

int main(int argc, char **argv) {
	int rounds = argc > 1 ? atoi(argv[1]) : 300;
	int flush_every = argc > 2 ? atoi(argv[2]) : 100;
	setup();
	unsigned long check = 0;
	for (int r = 0; r < rounds; r++) {
		check += sieve(SIEVE_N);
		check += (unsigned long)matmul();
		check += hash_words();
		check += (unsigned)sort_ints((unsigned)r);
		if (flush_every > 0 && (r + 1) % flush_every == 0)
			request_flush();
	}
	printf("workload done: %d rounds, check %lu\n", rounds, check);
	return 0;
}
