/* A program for elfsym's fuzzing of inlined calls: three levels of calls the compiler
 * inlines, in a loop. */
#include <stdio.h>

static inline unsigned mix(unsigned x) { return x * 2654435761u ^ x >> 13; }

static inline unsigned step(unsigned x, unsigned i) { return mix(x + i) + mix(i); }

static inline unsigned round_(unsigned x) {
	for (unsigned i = 0; i < 8; i++)
		x = step(x, i);
	return x;
}

int main(int argc, char **argv) {
	(void)argv;
	unsigned x = argc;
	for (int i = 0; i < 1000; i++)
		x = round_(x) + mix(x);
	printf("%u\n", x);
	return 0;
}
