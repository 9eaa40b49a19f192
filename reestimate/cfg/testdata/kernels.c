// Functions whose machine code the CFG tests recover: loops, branches, a switch that LLVM lowers
// to a jump table, tail calls, and a noreturn path. Compiled at test time with clang-14.

extern void sink(long);
extern void stop(void) __attribute__((noreturn));

int collatz_steps(unsigned long n) {
	int steps = 0;
	while (n != 1) {
		if (n & 1)
			n = 3 * n + 1;
		else
			n /= 2;
		steps++;
	}
	return steps;
}

long dispatch(int op, long a, long b) {
	switch (op) {
	case 0: return a + b;
	case 1: return a - b;
	case 2: return a * b;
	case 3: return b ? a / b : 0;
	case 4: return b ? a % b : 0;
	case 5: return a << (b & 63);
	case 6: return a >> (b & 63);
	case 7: return a ^ b;
	case 8: return a | (b * 3);
	case 9: return ~a & b;
	default: return -1;
	}
}

double dot(const double *x, const double *y, int n) {
	double s = 0;
	for (int i = 0; i < n; i++)
		s += x[i] * y[i];
	return s;
}

void walk(const long *v, int n) {
	for (int i = 0; i < n; i++) {
		if (v[i] < 0)
			stop();
		if (v[i] > 100)
			continue;
		sink(v[i]);
	}
	sink(0); /* a tail call */
}

int nested(int n, int m) {
	int acc = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < m; j++)
			acc += (i ^ j) & 1 ? i : j;
	return acc;
}
