// fft: iterative radix-2 complex FFT and its inverse over 2^K points, repeated. Stresses
// floating-point loops with loop-variant trip counts (the butterfly stages) and a
// bit-reversal permutation with unpredictable swaps.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void fft(int n, double *re, double *im, int inverse) {
	for (int i = 1, j = 0; i < n; i++) {
		int bit = n >> 1;
		for (; j & bit; bit >>= 1) j ^= bit;
		j ^= bit;
		if (i < j) {
			double t = re[i]; re[i] = re[j]; re[j] = t;
			t = im[i]; im[i] = im[j]; im[j] = t;
		}
	}
	for (int len = 2; len <= n; len <<= 1) {
		double ang = 2 * M_PI / len * (inverse ? -1 : 1);
		double wr = cos(ang), wi = sin(ang);
		for (int i = 0; i < n; i += len) {
			double cr = 1, ci = 0;
			for (int k = 0; k < len / 2; k++) {
				double ur = re[i + k], ui = im[i + k];
				double vr = re[i + k + len / 2] * cr - im[i + k + len / 2] * ci;
				double vi = re[i + k + len / 2] * ci + im[i + k + len / 2] * cr;
				re[i + k] = ur + vr; im[i + k] = ui + vi;
				re[i + k + len / 2] = ur - vr; im[i + k + len / 2] = ui - vi;
				double nr = cr * wr - ci * wi;
				ci = cr * wi + ci * wr;
				cr = nr;
			}
		}
	}
	if (inverse)
		for (int i = 0; i < n; i++) { re[i] /= n; im[i] /= n; }
}

int main(int argc, char **argv) {
	int k = argc > 1 ? atoi(argv[1]) : 12;
	int rounds = argc > 2 ? atoi(argv[2]) : 4;
	int n = 1 << k;
	double *re = malloc(sizeof(double) * (size_t)n), *im = malloc(sizeof(double) * (size_t)n);
	for (int i = 0; i < n; i++) { re[i] = (i * 37 % 101) / 101.0; im[i] = 0; }
	for (int r = 0; r < rounds; r++) {
		fft(n, re, im, 0);
		fft(n, re, im, 1);
	}
	printf("fft %.6f\n", re[n / 3]);
	free(re); free(im);
	return 0;
}
