/* A shared library for elfsym's tests. */
__attribute__((noinline)) long lib_hot(long n) {
	long s = 0;
	for (long i = 0; i < n; i++)
		s ^= i * 7;
	return s;
}

void *lib_hot_addr(void) { return (void *)lib_hot; }
