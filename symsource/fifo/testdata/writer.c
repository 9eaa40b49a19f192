/*
 * writer: drives jit/profd_jit.h for the fifo package's tests.
 *
 *   writer DIR roundtrip   every record type, a flush request among them; prints what it sent
 *   writer DIR absent      no FIFO: every call must be a harmless no-op
 *   writer DIR gone        connect, wait for a line on stdin (profd goes away), keep writing
 *   writer DIR exec        one load, then exec itself as "after-exec", which loads another
 *   writer DIR perfmap     a perf-map line (no code bytes) for a buffer of its own, then waits
 *                          for a line on stdin before exiting, so profd can read the bytes
 *   writer DIR flood       64 KiB loads into a FIFO nobody reads: some must be dropped whole
 */
#include "../../../jit/profd_jit.h"

#include <inttypes.h>

static unsigned char beta_code[48];
static unsigned char big_code[300000];

static int connect_fifo(profd_jit *pj, const char *dir)
{
	struct timespec ten_ms = {0, 10000000};
	int i, rc = PROFD_JIT_NO_DAEMON;
	for (i = 0; i < 500 && rc == PROFD_JIT_NO_DAEMON; i++) {
		rc = profd_jit_open(pj, dir);
		if (rc == PROFD_JIT_NO_DAEMON)
			nanosleep(&ten_ms, NULL);
	}
	pj->timeout_ms = 5000;
	return rc;
}

static int roundtrip(const char *dir)
{
	profd_jit pj;
	unsigned char alpha[32];
	profd_jit_line lines[3] = {
		{0x10000, 10, 0, "alpha.c"},
		{0x10008, 11, 2, "alpha.c"},
		{0x10010, 12, 0, "inc/alpha.h"},
	};
	uint64_t ia, ib, ic, id;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(alpha); i++)
		alpha[i] = (unsigned char)(i * 7);
	for (i = 0; i < sizeof(beta_code); i++)
		beta_code[i] = (unsigned char)(0xB0 + i);
	for (i = 0; i < sizeof(big_code); i++)
		big_code[i] = (unsigned char)(i * 31 + 7);

	rc = connect_fifo(&pj, dir);
	printf("open %d\n", rc);
	rc |= profd_jit_code_load(&pj, "alpha", 0x10000, sizeof(alpha), alpha, lines, 3, &ia);
	/* NULL code: the header library sends the bytes at the address itself. */
	rc |= profd_jit_code_load(&pj, "beta", (uint64_t)(uintptr_t)beta_code, sizeof(beta_code), NULL, NULL, 0, &ib);
	printf("beta 0x%" PRIx64 "\n", (uint64_t)(uintptr_t)beta_code);
	/* Larger than a pipe holds: written in pieces as profd reads. */
	rc |= profd_jit_code_load(&pj, "big", 0x200000, sizeof(big_code), big_code, NULL, 0, &ic);
	rc |= profd_jit_code_move(&pj, 0x10000, 0x30000, sizeof(alpha), ia);
	rc |= profd_jit_code_unload(&pj, (uint64_t)(uintptr_t)beta_code, ib);
	rc |= profd_jit_code_load(&pj, "\xce\xbb operator() const", 0x40000, 1, "\xc3", NULL, 0, &id);
	rc |= profd_jit_flush(&pj);
	rc |= profd_jit_close(&pj);
	printf("indexes %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", ia, ib, ic, id);
	printf("records %" PRIu64 " dropped %" PRIu64 " rc %d\n", pj.records, pj.dropped, rc);
	return rc == 0 ? 0 : 1;
}

static int absent(const char *dir)
{
	profd_jit pj;
	uint64_t idx;
	int rc = profd_jit_open(&pj, dir);
	printf("open %d\n", rc);
	if (rc != PROFD_JIT_NO_DAEMON)
		return 1;
	if (profd_jit_code_load(&pj, "f", 0x1000, 1, "\xc3", NULL, 0, &idx) != PROFD_JIT_NO_DAEMON ||
	    profd_jit_code_unload(&pj, 0x1000, idx) != PROFD_JIT_NO_DAEMON ||
	    profd_jit_code_move(&pj, 0x1000, 0x2000, 1, idx) != PROFD_JIT_NO_DAEMON ||
	    profd_jit_flush(&pj) != PROFD_JIT_NO_DAEMON || profd_jit_close(&pj) != PROFD_JIT_NO_DAEMON)
		return 1;
	printf("unprofiled ok\n");
	return 0;
}

static int gone(const char *dir)
{
	profd_jit pj;
	char line[16];
	uint64_t idx;
	int i, rc = connect_fifo(&pj, dir);
	printf("open %d\n", rc);
	fflush(stdout);
	if (rc != PROFD_JIT_OK || fgets(line, sizeof(line), stdin) == NULL)
		return 1;
	for (i = 0; i < 1000 && rc == PROFD_JIT_OK; i++)
		rc = profd_jit_code_load(&pj, "after_profd", 0x1000 + (uint64_t)i, 1, "\xc3", NULL, 0, &idx);
	printf("gone after %d loads rc %d fd %d\n", i, rc, pj.fd);
	return rc == PROFD_JIT_NO_DAEMON && pj.fd == -1 ? 0 : 1;
}

static int exec_self(const char *self, const char *dir, int after)
{
	profd_jit pj;
	uint64_t idx;
	int rc = connect_fifo(&pj, dir);
	rc |= profd_jit_code_load(&pj, after ? "after_exec" : "before_exec", 0x5000, 1, "\xc3", NULL, 0, &idx);
	printf("%s %d\n", after ? "after" : "before", rc);
	fflush(stdout);
	if (after || rc != 0)
		return rc == 0 ? 0 : 1;
	/* No close: the descriptor is O_CLOEXEC, exec drops it like a JIT that never cleans up. */
	execl(self, self, dir, "after-exec", (char *)NULL);
	perror("exec");
	return 1;
}

static int perfmap(const char *dir)
{
	char path[PROFD_JIT_PATH_MAX + 32], line[128], in[16];
	struct timespec ten_ms = {0, 10000000};
	size_t i;
	int fd = -1, n;
	for (i = 0; i < sizeof(beta_code); i++)
		beta_code[i] = (unsigned char)(0x40 ^ i);
	snprintf(path, sizeof(path), "%s/%lu.map", dir, (unsigned long)getpid());
	for (i = 0; i < 500 && fd < 0; i++) {
		fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			nanosleep(&ten_ms, NULL);
	}
	if (fd < 0)
		return 1;
	n = snprintf(line, sizeof(line), "%" PRIxPTR " %zx perf_map_function\n", (uintptr_t)beta_code, sizeof(beta_code));
	if (write(fd, line, (size_t)n) != n)
		return 1;
	printf("wrote %s", line);
	fflush(stdout);
	if (fgets(in, sizeof(in), stdin) == NULL)
		return 1;
	close(fd);
	return 0;
}

static int flood(const char *dir)
{
	static unsigned char code[65536];
	profd_jit pj;
	uint64_t idx, start;
	int i, rc = connect_fifo(&pj, dir);
	if (rc != PROFD_JIT_OK)
		return 1;
	pj.timeout_ms = 20;
	start = profd_jit__now();
	for (i = 0; i < 24; i++) {
		rc = profd_jit_code_load(&pj, "flood", 0x1000 * (uint64_t)(i + 1), sizeof(code), code, NULL, 0, &idx);
		if (rc != PROFD_JIT_OK && rc != PROFD_JIT_DROPPED)
			break;
	}
	printf("records %" PRIu64 " dropped %" PRIu64 " broken %d fd_open %d elapsed_ms %" PRIu64 "\n", pj.records,
	       pj.dropped, pj.broken, pj.fd >= 0, (profd_jit__now() - start) / 1000000u);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: writer DIR roundtrip|absent|gone|exec\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(argv[2], "roundtrip") == 0)
		return roundtrip(argv[1]);
	if (strcmp(argv[2], "absent") == 0)
		return absent(argv[1]);
	if (strcmp(argv[2], "gone") == 0)
		return gone(argv[1]);
	if (strcmp(argv[2], "perfmap") == 0)
		return perfmap(argv[1]);
	if (strcmp(argv[2], "flood") == 0)
		return flood(argv[1]);
	if (strcmp(argv[2], "exec") == 0)
		return exec_self(argv[0], argv[1], 0);
	if (strcmp(argv[2], "after-exec") == 0)
		return exec_self(argv[0], argv[1], 1);
	return 2;
}
