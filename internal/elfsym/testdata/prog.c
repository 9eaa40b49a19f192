/* A program for elfsym's tests: prints the addresses of its functions, then waits for
 * stdin to close. hot is static, so a stripped build keeps it only in its debug file. */
#include <stdio.h>
#include <unistd.h>

extern void *lib_hot_addr(void);

static __attribute__((noinline)) long hot(long n) {
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i * i;
	return s;
}

__attribute__((noinline)) long warm(long n) { return hot(n) + 1; }

int main(int argc, char **argv) {
	(void)argv;
	printf("hot %p\nwarm %p\n", (void *)hot, (void *)warm);
#ifdef WITH_LIB
	printf("lib_hot %p\n", lib_hot_addr());
#endif
	printf("sum %ld\n", warm(argc));
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0) {
	}
	return 0;
}
