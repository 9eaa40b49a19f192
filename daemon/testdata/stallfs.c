// stallfs: mounts a one-file FUSE file system at ARGV[1] (as root, for every user:
// allow_other), maps its file "code" (64 pages of jump-to-self) executable and runs its
// first page in a thread. From then on it answers no request, as a stalled server would: a
// process that opens the file, or reads one of its other pages, hangs, past SIGKILL. Each
// request left unanswered is printed on standard error. With "perfmap" after the mount
// point it also names the last page of the mapping in its perf map, /tmp/perf-PID.map, as
// a JIT's function: reading that function's code from the process's memory hangs too.
#define _GNU_SOURCE
#include <linux/fuse.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static int fd;
static volatile int armed;
static char page[64 * 4096];

static void reply(uint64_t unique, int error, const void *body, size_t n) {
	char buf[8192];
	struct fuse_out_header h = {.len = sizeof h + n, .error = error, .unique = unique};
	memcpy(buf, &h, sizeof h);
	if (n) memcpy(buf + sizeof h, body, n);
	if (write(fd, buf, sizeof h + n) < 0 && errno != ENOENT) perror("stallfs: write");
}

static void attr(uint64_t node, struct fuse_attr *a) {
	memset(a, 0, sizeof *a);
	a->ino = node;
	a->nlink = 1;
	if (node == 1) { a->mode = S_IFDIR | 0755; a->size = 0; }
	else { a->mode = S_IFREG | 0755; a->size = sizeof page; a->blocks = 8; }
	a->blksize = 4096;
}

static void *serve(void *arg) {
	static char buf[(1 << 20) + 4096];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0) { if (errno == EINTR || errno == ENOENT) continue; if (errno == ENODEV) return NULL; perror("stallfs: read"); return NULL; }
		struct fuse_in_header *in = (void *)buf;
		void *body = buf + sizeof *in;
		if (in->opcode == FUSE_FORGET || in->opcode == FUSE_BATCH_FORGET) continue;
		if (armed && in->opcode != FUSE_INIT) {
			fprintf(stderr, "stallfs: request %u of tid %u left unanswered\n", in->opcode, in->pid);
			continue;
		}
		switch (in->opcode) {
		case FUSE_INIT: {
			struct fuse_init_in *ii = body;
			struct fuse_init_out o = {.major = FUSE_KERNEL_VERSION, .minor = ii->minor < FUSE_KERNEL_MINOR_VERSION ? ii->minor : FUSE_KERNEL_MINOR_VERSION,
				.max_readahead = 0, .max_write = 4096, .time_gran = 1};
			reply(in->unique, 0, &o, sizeof o);
			break;
		}
		case FUSE_LOOKUP:
			if (in->nodeid == 1 && strcmp(body, "code") == 0) {
				struct fuse_entry_out e = {.nodeid = 2, .entry_valid = 3600, .attr_valid = 3600};
				attr(2, &e.attr);
				reply(in->unique, 0, &e, sizeof e);
			} else reply(in->unique, -ENOENT, NULL, 0);
			break;
		case FUSE_GETATTR: {
			struct fuse_attr_out o = {.attr_valid = 3600};
			attr(in->nodeid, &o.attr);
			reply(in->unique, 0, &o, sizeof o);
			break;
		}
		case FUSE_OPEN: {
			struct fuse_open_out o = {.fh = 1, .open_flags = FOPEN_KEEP_CACHE};
			reply(in->unique, 0, &o, sizeof o);
			break;
		}
		case FUSE_READ: {
			struct fuse_read_in *r = body;
			size_t len = r->offset >= sizeof page ? 0 : sizeof page - r->offset;
			if (len > r->size) len = r->size;
			reply(in->unique, 0, page + r->offset, len);
			break;
		}
		case FUSE_RELEASE: case FUSE_FLUSH:
			reply(in->unique, 0, NULL, 0);
			break;
		default:
			reply(in->unique, -ENOSYS, NULL, 0);
		}
	}
}

static void *spin(void *code) { ((void (*)(void))code)(); return NULL; }

int main(int argc, char **argv) {
	char opts[256], path[4096];
	pthread_t server, runner;
	if (argc < 2 || argc > 3) { fprintf(stderr, "usage: stallfs MOUNTPOINT [perfmap]\n"); return 2; }
	for (size_t i = 0; i < sizeof page; i += 2) { page[i] = (char)0xeb; page[i + 1] = (char)0xfe; }
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0) { perror("stallfs: /dev/fuse"); return 1; }
	snprintf(opts, sizeof opts, "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd);
	if (mount("stallfs", argv[1], "fuse.stallfs", MS_NODEV | MS_NOSUID, opts) != 0) { perror("stallfs: mount"); return 1; }
	pthread_create(&server, NULL, serve, NULL);
	snprintf(path, sizeof path, "%s/code", argv[1]);
	int f = open(path, O_RDONLY);
	if (f < 0) { perror("stallfs: open code"); return 1; }
	void *code = mmap(NULL, sizeof page, PROT_READ | PROT_EXEC, MAP_PRIVATE, f, 0);
	if (code == MAP_FAILED) { perror("stallfs: mmap"); return 1; }
	close(f);
	madvise(code, sizeof page, MADV_RANDOM); /* a fault reads its page alone */
	volatile char c = *(volatile char *)code; (void)c; /* fault the first page in while answered */
	if (argc == 3) {
		snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
		FILE *m = fopen(path, "w");
		if (m == NULL) { perror("stallfs: perf map"); return 1; }
		fprintf(m, "%lx 1000 stalled_page\n", (unsigned long)((char *)code + sizeof page - 4096));
		fclose(m);
	}
	armed = 1;
	printf("armed %d\n", getpid());
	fflush(stdout);
	pthread_create(&runner, NULL, spin, code);
	pthread_join(runner, NULL);
	return 0;
}
