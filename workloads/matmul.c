// matmul: dense double matrix multiply C = A*B (i-k-j order), repeated. Stresses a
// vectorised, unrolled innermost loop with a remainder loop: few blocks, huge counts.
#include <stdio.h>
#include <stdlib.h>

static void matmul(int n, const double *a, const double *b, double *c) {
	for (int i = 0; i < n * n; i++) c[i] = 0;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < n; k++) {
			double aik = a[i * n + k];
			for (int j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
		}
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 60;
	int rounds = argc > 2 ? atoi(argv[2]) : 2;
	double *a = malloc(sizeof(double) * (size_t)n * n), *b = malloc(sizeof(double) * (size_t)n * n);
	double *c = malloc(sizeof(double) * (size_t)n * n);
	for (int i = 0; i < n * n; i++) { a[i] = (i % 7) - 3; b[i] = (i % 5) * 0.5; }
	double sum = 0;
	for (int r = 0; r < rounds; r++) {
		matmul(n, a, b, c);
		a[r % (n * n)] += 1;
		sum += c[(r * 7) % (n * n)];
	}
	printf("matmul %.1f\n", sum);
	free(a); free(b); free(c);
	return 0;
}
