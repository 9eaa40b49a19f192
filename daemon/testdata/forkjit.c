// forkjit is a JIT server that forks its workers after it compiled, as PHP-FPM's opcache JIT
// and pre-forking servers do. It writes a loop of machine code into private memory and
// names it in its perf map (inherited_loop), maps a page of shared memory (MAP_SHARED |
// MAP_ANONYMOUS), and forks two workers without exec, keeping its perf map open. The first
// runs inherited_loop, its copy of the parent's code. The second compiles worker_loop into
// the shared page and names it in the perf map it inherited (the parent's file, named by the
// parent's pid), then runs it. Each worker runs for the seconds of CPU time the argument
// gives; the parent waits for them. With a second argument "daemon", it runs as a daemon
// does: the process that opened the perf map forks the server, which starts a session of
// its own and lets its standard streams go, and exits a tenth of a second later, leaving
// the map named by its own pid.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* countdown: dec %rdi; jnz countdown; ret */
static const unsigned char loop[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};

static void run(unsigned char *code, int secs) {
	void (*countdown)(long) = (void (*)(long))code;
	struct timespec now;
	do {
		countdown(10000000);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
	} while (now.tv_sec < secs);
}

int main(int argc, char **argv) {
	int secs = argc > 1 ? atoi(argv[1]) : 2;
	unsigned char *private = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (private == MAP_FAILED || shared == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	char path[64];
	snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
	FILE *perfmap = fopen(path, "w");
	if (perfmap == NULL) {
		perror(path);
		return 1;
	}
	memcpy(private, loop, sizeof loop);
	fprintf(perfmap, "%lx %zx inherited_loop\n", (unsigned long)private, sizeof loop);
	fflush(perfmap);
	if (argc > 2 && strcmp(argv[2], "daemon") == 0) {
		pid_t server = fork();
		if (server < 0) {
			perror("fork");
			return 1;
		}
		if (server > 0) {
			usleep(100000);
			return 0;
		}
		/* As a daemon does: a session of its own (the launcher's pid is free once it
		 * exits), its standard streams let go. */
		setsid();
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	pid_t workers[2];
	for (int i = 0; i < 2; i++) {
		workers[i] = fork();
		if (workers[i] < 0) {
			perror("fork");
			return 1;
		}
		if (workers[i] > 0)
			continue;
		if (i == 0) {
			run(private, secs);
		} else {
			unsigned char *code = shared + 64;
			memcpy(code, loop, sizeof loop);
			fprintf(perfmap, "%lx %zx worker_loop\n", (unsigned long)code, sizeof loop);
			fflush(perfmap);
			run(code, secs);
		}
		_exit(0);
	}
	for (int i = 0; i < 2; i++)
		waitpid(workers[i], NULL, 0);
	return 0;
}
