// chase: pointer chasing around a randomly permuted singly linked cycle, summing payloads
// and taking a data-dependent branch per node. Stresses a loop whose every iteration waits on
// a load, with an unpredictable branch inside.
#include <stdio.h>
#include <stdlib.h>

struct node { struct node *next; long payload; };

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	int laps = argc > 2 ? atoi(argv[2]) : 4;
	struct node *nodes = malloc(sizeof *nodes * (size_t)n);
	int *perm = malloc(sizeof(int) * (size_t)n);
	unsigned s = 7;
	for (int i = 0; i < n; i++) perm[i] = i;
	for (int i = n - 1; i > 0; i--) {
		s = s * 1664525u + 1013904223u;
		int j = (int)(s % (unsigned)(i + 1));
		int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
	}
	for (int i = 0; i < n; i++) {
		nodes[perm[i]].next = &nodes[perm[(i + 1) % n]];
		nodes[perm[i]].payload = (perm[i] * 2654435761u) >> 7;
	}
	long sum = 0, odd = 0;
	struct node *p = &nodes[perm[0]];
	for (long step = 0; step < (long)n * laps; step++) {
		if (p->payload & 1) odd++;
		else sum += p->payload;
		p = p->next;
	}
	printf("chase %ld %ld\n", sum, odd);
	free(nodes); free(perm);
	return 0;
}
