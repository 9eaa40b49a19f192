// sort: quicksort with an insertion-sort cutoff over pseudo-random ints, repeated.
// Stresses data-dependent branches (the partition compare), recursion and short inner loops.
#include <stdio.h>
#include <stdlib.h>

static unsigned lcg(unsigned *s) { return *s = *s * 1103515245u + 12345u; }

static void insertion(int *a, int n) {
	for (int i = 1; i < n; i++) {
		int v = a[i], j = i - 1;
		while (j >= 0 && a[j] > v) {
			a[j + 1] = a[j];
			j--;
		}
		a[j + 1] = v;
	}
}

static void quicksort(int *a, int n) {
	while (n > 16) {
		int p = a[n / 2], i = 0, j = n - 1;
		while (i <= j) {
			while (a[i] < p) i++;
			while (a[j] > p) j--;
			if (i <= j) {
				int t = a[i]; a[i] = a[j]; a[j] = t;
				i++; j--;
			}
		}
		if (j + 1 < n - i) { quicksort(a, j + 1); a += i; n -= i; }
		else { quicksort(a + i, n - i); n = j + 1; }
	}
	insertion(a, n);
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	int rounds = argc > 2 ? atoi(argv[2]) : 4;
	int *a = malloc(sizeof(int) * (size_t)n);
	unsigned s = 1, check = 0;
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < n; i++) a[i] = (int)(lcg(&s) >> 8) % 100000;
		quicksort(a, n);
		for (int i = 1; i < n; i++)
			if (a[i - 1] > a[i]) { printf("unsorted\n"); return 1; }
		check = check * 31 + (unsigned)a[n / 3];
	}
	printf("sort %u\n", check);
	free(a);
	return 0;
}
