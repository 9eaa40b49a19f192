// sharedjit puts a loop of machine code in shared anonymous memory (MAP_SHARED |
// MAP_ANONYMOUS, which /proc/PID/maps shows as "/dev/zero (deleted)"), or with a second
// argument "memfd" in a memfd mapped twice, writable and executable, as JITs that keep W^X
// do ("/memfd:jit-code (deleted)"); names it in its perf map as a JIT does, and runs it for
// the seconds of CPU time its first argument gives (on a busy machine it takes longer, and
// is sampled as often as when idle).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
	int secs = argc > 1 ? atoi(argv[1]) : 3;
	unsigned char *code, *write;
	if (argc > 2 && strcmp(argv[2], "memfd") == 0) {
		int fd = memfd_create("jit-code", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, 4096) < 0) {
			perror("memfd");
			return 1;
		}
		write = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		code = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	} else {
		code = write = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	}
	if (code == MAP_FAILED || write == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	/* countdown: dec %rdi; jnz countdown; ret */
	static const unsigned char loop[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};
	memcpy(write, loop, sizeof loop);
	char path[64];
	snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		perror(path);
		return 1;
	}
	fprintf(f, "%lx %zx shared_jit_loop\n", (unsigned long)code, sizeof loop);
	fclose(f);
	void (*countdown)(long) = (void (*)(long))code;
	struct timespec now;
	do {
		countdown(10000000);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
	} while (now.tv_sec < secs);
	return 0;
}
