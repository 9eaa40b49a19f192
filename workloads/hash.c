// hash: builds decimal-string keys, hashes them (FNV-1a) into an open-addressing table,
// then looks up hits and misses. Stresses byte loops over short strings, string compares and
// probe loops whose length depends on collisions.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct slot { char key[16]; int value; int used; };

static unsigned fnv(const char *s) {
	unsigned h = 2166136261u;
	for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static int keyof(char *buf, unsigned v) {
	char tmp[16];
	int n = 0;
	do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
	for (int i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
	buf[n] = 0;
	return n;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	unsigned cap = 1;
	while (cap < (unsigned)n * 2) cap <<= 1;
	struct slot *t = calloc(cap, sizeof *t);
	char k[16];
	for (int i = 0; i < n; i++) {
		keyof(k, (unsigned)i * 7919u);
		unsigned h = fnv(k) & (cap - 1);
		while (t[h].used && strcmp(t[h].key, k) != 0) h = (h + 1) & (cap - 1);
		strcpy(t[h].key, k);
		t[h].value = i;
		t[h].used = 1;
	}
	long found = 0;
	for (int i = 0; i < 2 * n; i++) {
		keyof(k, (unsigned)i * 3967u);
		unsigned h = fnv(k) & (cap - 1);
		while (t[h].used) {
			if (strcmp(t[h].key, k) == 0) { found += t[h].value; break; }
			h = (h + 1) & (cap - 1);
		}
	}
	printf("hash %ld\n", found);
	free(t);
	return 0;
}
