// recurse: naive Fibonacci and a Tak function. Stresses calls, returns and the
// recursion base-case branch; almost no loops.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__attribute__((noinline)) static int tak(int x, int y, int z) {
	return y < x ? tak(tak(x - 1, y, z), tak(y - 1, z, x), tak(z - 1, x, y)) : z;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 22;
	long f = fib(n);
	int t = tak(n / 2 + 4, n / 4 + 2, n / 8);
	printf("recurse %ld %d\n", f, t);
	return 0;
}
