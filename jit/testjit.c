/*
 * testjit: a tiny JIT for profd's tests and demos.
 *
 * It writes real x86-64 machine code (counting loops with 1, 4 and 16 adds in the loop body)
 * into executable memory it maps itself, announces each function through profd_jit.h, and
 * runs it for a set time. It then unloads one function and loads another at the same address,
 * and moves a third, so tests can check that samples are attributed by time as well as by
 * address.
 *
 *   cc -O1 -std=c99 -D_GNU_SOURCE -o testjit jit/testjit.c
 *   testjit [-d DIR] [-m MS] [-r ROUNDS] [-w WAIT_MS] [-f | -F] [-R] [-a] [-c] [-o OUTDIR] [-g] [-C N [-S BYTES]]
 *           [-A ADDR] [-X PROGRAM [ARG...]]
 *
 *   -d DIR      profd's FIFO directory (default: as profd_jit_default_dir)
 *   -m MS       how long each function runs in each phase, in CPU time (default 200)
 *   -r ROUNDS   how many times the whole load/run/unload/reuse/move sequence runs (default 1)
 *   -w WAIT_MS  keep retrying to open the FIFO this long before running unprofiled (default 0)
 *   -f          ask profd for this process's profiles after each round, without waiting
 *   -F          the same, waiting (up to 5 s) for profd's answer and printing it
 *   -R          with -F, also read each file the answer names, as this process's user
 *   -a          with -F, ask once more after the last round, no JIT code having run since
 *   -c          close the FIFO writer after each round and open it again (a new stream)
 *   -o OUTDIR   no FIFO: write the records to a jitdump file, OUTDIR/jit-PID.dump.partial,
 *               renamed to OUTDIR/jit-PID.dump at exit (a JIT whose symbols appear only when
 *               it is done); OUTDIR is made if need be
 *   -g          print "waiting" and load and run nothing until a byte (or the end) comes on
 *               stdin: profilers attached meanwhile see the whole run
 *   -C N        churn instead: each round loads N new functions of BYTES bytes each (code and a
 *               line table), unloads the N of the round before, and runs one of the new ones
 *               for MS ms, so that code keeps ending and most of it draws no sample; its loads
 *               and unloads are not printed, each round's run is, and "churned LOADS" at the end
 *   -S BYTES    with -C, each function's size (default 64, at least 32)
 *   -A ADDR     map the code at address ADDR (hex), as a JIT that reserves its code space at
 *               a fixed address does
 *   -X          once count_small and count_medium have run, exec the PROGRAM that follows the
 *               options, their code still loaded, as a program that execs another does
 *
 * Each event is printed on stdout as one line:
 *   load NAME ADDR SIZE INDEX | unload NAME ADDR INDEX | move NAME OLD NEW SIZE INDEX |
 *   ran NAME ITERATIONS RESULT | profd STATUS | reopen STATUS | flush rc=RC |
 *   flushed rc=RC status=STATUS paths=PATH,PATH,... | read PATH BYTES | read PATH error ERRNO
 */
#include "profd_jit.h"

#include <inttypes.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* One function: rdi = iterations; returns adds_per_iteration * iterations. */
static size_t emit_counter(unsigned char *p, int adds)
{
	unsigned char *start = p, *loop;
	int32_t rel;
	int i;
	*p++ = 0x31; *p++ = 0xC0;                    /* xor eax, eax */
	*p++ = 0x48; *p++ = 0x85; *p++ = 0xFF;       /* test rdi, rdi */
	*p++ = 0x74; *p++ = (unsigned char)(4 * adds + 3 + 6); /* jz done (rel8 over loop) */
	loop = p;
	for (i = 0; i < adds; i++) {
		*p++ = 0x48; *p++ = 0x83; *p++ = 0xC0; *p++ = 0x01; /* add rax, 1 */
	}
	*p++ = 0x48; *p++ = 0xFF; *p++ = 0xCF;       /* dec rdi */
	*p++ = 0x0F; *p++ = 0x85;                    /* jnz loop (rel32) */
	rel = (int32_t)(loop - (p + 4));
	memcpy(p, &rel, 4);
	p += 4;
	*p++ = 0xC3; /* done: ret */
	return (size_t)(p - start);
}

typedef uint64_t (*counter_fn)(uint64_t);

struct func {
	const char *name;
	int adds;
	unsigned char *addr;
	size_t size;
	uint64_t index;
};

static profd_jit pj;
static unsigned char *region;
static size_t region_size = 4096;

static int writable(int yes)
{
	return mprotect(region, region_size, yes ? PROT_READ | PROT_WRITE : PROT_READ | PROT_EXEC);
}

static void load(struct func *f, unsigned char *at)
{
	profd_jit_line lines[3];
	char file[64];
	int rc;
	writable(1);
	f->addr = at;
	f->size = emit_counter(at, f->adds);
	writable(0);
	snprintf(file, sizeof(file), "%s.jit", f->name);
	lines[0].addr = (uint64_t)(uintptr_t)at;         /* entry */
	lines[0].line = 1;
	lines[1].addr = (uint64_t)(uintptr_t)at + 7;     /* loop body */
	lines[1].line = 2;
	lines[2].addr = (uint64_t)(uintptr_t)at + f->size - 1; /* ret */
	lines[2].line = 3;
	lines[0].discriminator = lines[1].discriminator = lines[2].discriminator = 0;
	lines[0].file = lines[1].file = lines[2].file = file;
	rc = profd_jit_code_load(&pj, f->name, (uint64_t)(uintptr_t)at, f->size, NULL, lines, 3, &f->index);
	printf("load %s 0x%" PRIx64 " %zu %" PRIu64 " rc=%d\n", f->name, (uint64_t)(uintptr_t)at, f->size, f->index, rc);
}

static void unload(struct func *f)
{
	profd_jit_code_unload(&pj, (uint64_t)(uintptr_t)f->addr, f->index);
	printf("unload %s 0x%" PRIx64 " %" PRIu64 "\n", f->name, (uint64_t)(uintptr_t)f->addr, f->index);
	writable(1);
	memset(f->addr, 0xCC, f->size); /* int3: running unloaded code traps */
	writable(0);
}

static void move(struct func *f, unsigned char *to)
{
	unsigned char *from = f->addr;
	writable(1);
	memmove(to, from, f->size);
	memset(from, 0xCC, f->size);
	writable(0);
	f->addr = to;
	profd_jit_code_move(&pj, (uint64_t)(uintptr_t)from, (uint64_t)(uintptr_t)to, f->size, f->index);
	printf("move %s 0x%" PRIx64 " 0x%" PRIx64 " %zu %" PRIu64 "\n", f->name, (uint64_t)(uintptr_t)from,
	       (uint64_t)(uintptr_t)to, f->size, f->index);
}

/* mkdirs makes dir and its missing parents. */
static void mkdirs(const char *dir)
{
	char path[4096];
	size_t i;
	snprintf(path, sizeof(path), "%s", dir);
	for (i = 1; path[i] != '\0'; i++) {
		if (path[i] == '/') {
			path[i] = '\0';
			mkdir(path, 0755);
			path[i] = '/';
		}
	}
	mkdir(path, 0755);
}

static uint64_t now_ms(void)
{
	return profd_jit__now() / 1000000u;
}

/* cpu_ms is the CPU time this thread has used: a phase lasts as long in CPU time, and so
 * draws as many samples, however busy the machine is. */
static uint64_t cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void run(struct func *f, long ms)
{
	counter_fn fn;
	uint64_t end = cpu_ms() + (uint64_t)ms, iters = 0, result = 0;
	memcpy(&fn, &f->addr, sizeof(fn));
	do {
		result += fn(100000);
		iters += 100000;
	} while (cpu_ms() < end);
	printf("ran %s %" PRIu64 " %" PRIu64 "\n", f->name, iters, result);
	if (result != iters * (uint64_t)f->adds) {
		fprintf(stderr, "testjit: %s computed %" PRIu64 ", want %" PRIu64 "\n", f->name, result,
		        iters * (uint64_t)f->adds);
		exit(1);
	}
}

/* read_back reads the file at path to its end and prints how many bytes it holds. */
static void read_back(const char *path)
{
	char buf[65536];
	uint64_t total = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		printf("read %s error %d\n", path, errno);
		return;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		total += (uint64_t)n;
	if (n < 0)
		printf("read %s error %d\n", path, errno);
	else
		printf("read %s %" PRIu64 "\n", path, total);
	close(fd);
}

/* print_flush asks profd for this process's profiles, waits for the answer and prints it;
 * with readback, it then reads each file the answer names. */
static void print_flush(profd_jit *pj, int readback)
{
	profd_jit_reply reply;
	unsigned i;
	int rc = profd_jit_flush_wait(pj, PROFD_JIT_FLUSH_ALL, 5000, &reply);
	if (rc != PROFD_JIT_OK) {
		printf("flushed rc=%d\n", rc);
		return;
	}
	printf("flushed rc=0 status=%d paths=", reply.status);
	for (i = 0; i < reply.npaths; i++)
		printf("%s%s", i > 0 ? "," : "", reply.paths[i]);
	printf("\n");
	for (i = 0; readback && i < reply.npaths; i++)
		read_back(reply.paths[i]);
}

/* churn_round loads n functions of size bytes each into one half of the region (the other
 * half holds the round before's, unloaded first), then runs one of them for ms ms. */
static void churn_round(long r, long n, size_t size, long ms, uint64_t *indices)
{
	unsigned char *half = region + (size_t)(r % 2) * (size_t)n * size;
	unsigned char *old = region + (size_t)((r + 1) % 2) * (size_t)n * size;
	struct func f = {"churn", 1, NULL, 0, 0};
	profd_jit_line lines[2];
	char name[64];
	long i;
	if (r > 0) {
		for (i = 0; i < n; i++)
			profd_jit_code_unload(&pj, (uint64_t)(uintptr_t)(old + (size_t)i * size), indices[n + i]);
	}
	writable(1);
	memset(half, 0x90, (size_t)n * size); /* nops after each function's ret: one block */
	for (i = 0; i < n; i++)
		emit_counter(half + (size_t)i * size, 1);
	writable(0);
	for (i = 0; i < n; i++) {
		unsigned char *at = half + (size_t)i * size;
		snprintf(name, sizeof(name), "churn_%ld_%ld", r, i);
		lines[0].addr = (uint64_t)(uintptr_t)at;
		lines[0].line = 1;
		lines[1].addr = (uint64_t)(uintptr_t)at + 7;
		lines[1].line = 2;
		lines[0].discriminator = lines[1].discriminator = 0;
		lines[0].file = lines[1].file = "churn.jit";
		profd_jit_code_load(&pj, name, (uint64_t)(uintptr_t)at, size, NULL, lines, 2, &indices[i]);
	}
	memmove(indices + n, indices, (size_t)n * sizeof(*indices)); /* this round's, to unload next */
	f.addr = half;
	f.size = size;
	run(&f, ms);
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *out = NULL;
	char partial[4200], dump[4096];
	long ms = 200, rounds = 1, wait_ms = 0, r;
	long churn = 0, churn_size = 64;
	uint64_t *indices = NULL;
	int flush = 0, readback = 0, again = 0, reopen = 0, opt, rc;
	uint64_t give_up;
	struct timespec ten_ms = {0, 10000000};

	int gate = 0, exec_after = 0;
	void *at = NULL;
	while ((opt = getopt(argc, argv, "+d:m:r:w:fFRaco:gC:S:A:X")) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'm': ms = strtol(optarg, NULL, 10); break;
		case 'r': rounds = strtol(optarg, NULL, 10); break;
		case 'w': wait_ms = strtol(optarg, NULL, 10); break;
		case 'f': flush = 1; break;
		case 'F': flush = 2; break;
		case 'R': readback = 1; break;
		case 'a': again = 1; break;
		case 'c': reopen = 1; break;
		case 'o': out = optarg; break;
		case 'g': gate = 1; break;
		case 'C': churn = strtol(optarg, NULL, 10); break;
		case 'S': churn_size = strtol(optarg, NULL, 10); break;
		case 'A': at = (void *)(uintptr_t)strtoull(optarg, NULL, 16); break;
		case 'X': exec_after = 1; break;
		default:
			fprintf(stderr, "usage: testjit [-d DIR] [-m MS] [-r ROUNDS] [-w WAIT_MS] [-f | -F] [-R] [-a] [-c] [-o OUTDIR] [-g] [-C N [-S BYTES]] [-A ADDR] [-X PROGRAM [ARG...]]\n");
			return 2;
		}
	}
	if (exec_after && optind >= argc) {
		fprintf(stderr, "testjit: -X wants the program to exec after the options\n");
		return 2;
	}
	if (churn < 0 || churn_size < 32) {
		fprintf(stderr, "testjit: -C wants N >= 0, -S at least 32 bytes\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (out != NULL) {
		mkdirs(out);
		snprintf(dump, sizeof(dump), "%s/jit-%ld.dump", out, (long)getpid());
		snprintf(partial, sizeof(partial), "%s.partial", dump);
		rc = profd_jit_open_file(&pj, partial, 0);
		printf("file %s\n", rc == PROFD_JIT_OK ? "open" : "error");
	} else {
		give_up = now_ms() + (uint64_t)wait_ms;
		for (;;) {
			rc = profd_jit_open(&pj, dir);
			if (rc != PROFD_JIT_NO_DAEMON || now_ms() >= give_up)
				break;
			nanosleep(&ten_ms, NULL);
		}
		printf("profd %s\n", rc == PROFD_JIT_OK ? "connected" : rc == PROFD_JIT_NO_DAEMON ? "absent" : "error");
	}

	if (churn > 0) {
		region_size = (2 * (size_t)churn * (size_t)churn_size + 4095) & ~(size_t)4095;
		indices = calloc(2 * (size_t)churn, sizeof(*indices));
		if (indices == NULL) {
			perror("testjit: calloc");
			return 1;
		}
	}
	if (gate) {
		printf("waiting\n");
		getchar();
	}
	region = mmap(at, region_size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | (at != NULL ? MAP_FIXED_NOREPLACE : 0), -1, 0);
	if (region == MAP_FAILED || (at != NULL && region != at)) {
		perror("testjit: mmap");
		return 1;
	}
	for (r = 0; churn > 0 && r < rounds; r++) {
		churn_round(r, churn, (size_t)churn_size, ms, indices);
		if (flush == 1)
			printf("flush rc=%d\n", profd_jit_flush(&pj));
		if (flush == 2)
			print_flush(&pj, readback);
	}
	if (churn > 0)
		printf("churned %ld\n", rounds * churn);
	for (r = 0; churn == 0 && r < rounds; r++) {
		struct func small = {"count_small", 1, NULL, 0, 0};
		struct func medium = {"count_medium", 4, NULL, 0, 0};
		struct func large = {"count_large", 16, NULL, 0, 0};
		writable(1); /* after a round the region is read+exec only */
		memset(region, 0xCC, region_size);
		writable(0);
		load(&small, region);
		load(&medium, region + 0x400);
		run(&small, ms);
		run(&medium, ms);
		if (exec_after) {
			printf("exec %s\n", argv[optind]);
			execvp(argv[optind], &argv[optind]);
			perror("testjit: exec");
			return 1;
		}
		/* Reuse: count_small goes, count_large takes its address. */
		unload(&small);
		load(&large, region);
		run(&large, ms);
		/* count_medium moves further up. */
		move(&medium, region + 0x800);
		run(&medium, ms);
		unload(&large);
		unload(&medium);
		if (flush == 1)
			printf("flush rc=%d\n", profd_jit_flush(&pj));
		if (flush == 2)
			print_flush(&pj, readback);
		if (reopen && out == NULL && r + 1 < rounds) {
			profd_jit_close(&pj);
			rc = profd_jit_open(&pj, dir);
			printf("reopen %s\n", rc == PROFD_JIT_OK ? "connected" : rc == PROFD_JIT_NO_DAEMON ? "absent" : "error");
		}
	}
	if (flush == 2 && again)
		print_flush(&pj, readback);
	profd_jit_close(&pj);
	if (out != NULL && rename(partial, dump) != 0) {
		perror("testjit: rename");
		return 1;
	}
	printf("records %" PRIu64 " dropped %" PRIu64 "\n", pj.records, pj.dropped);
	return 0;
}
