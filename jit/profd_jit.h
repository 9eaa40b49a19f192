/*
 * profd_jit.h: tell profd about the machine code a JIT runtime emits.
 *
 * Header only, C99 plus POSIX.1-2008, no other dependency. See docs/jit-runtime.md.
 *
 *   profd_jit pj;
 *   profd_jit_open(&pj, NULL);          // NULL: $PROFD_DIR, /run/profd (root), $XDG_RUNTIME_DIR/profd
 *                                       // (or profd_jit_open_file: a jitdump file instead)
 *                                       // PROFD_JIT_NO_DAEMON until profd profiles this process:
 *                                       // open again later (before a compile, at most every
 *                                       // second or so), then announce the code still live
 *   uint64_t idx;
 *   profd_jit_code_load(&pj, "fib", (uint64_t)(uintptr_t)code, size, code, NULL, 0, &idx);
 *   ...
 *   profd_jit_code_unload(&pj, (uint64_t)(uintptr_t)code, idx);
 *   profd_jit_reply r;                  // ask profd for this process's LLVM profile, wait
 *   profd_jit_flush_wait(&pj, PROFD_JIT_FLUSH_LLVM_EXTBINARY, 5000, &r);
 *                                       // for it (ms), and read where it is: r.paths[0]
 *   profd_jit_close(&pj);
 *
 * Records go out as a Linux perf jitdump stream (file header first, then CODE_LOAD,
 * CODE_DEBUG_INFO, CODE_MOVE, CODE_CLOSE) in the machine's byte order, plus profd's
 * CODE_UNLOAD (id 0x7F000001) and FLUSH_REQUEST (0x7F000002) extensions, which other jitdump
 * readers skip by their size. profd answers a flush request on <dir>/<pid>.reply.
 *
 * With no profd running, profd_jit_open returns PROFD_JIT_NO_DAEMON and every other call
 * does nothing: the JIT runs on unprofiled. Writes never block for long (a full pipe is
 * waited on for at most timeout_ms), and a profd that goes away never kills the JIT with
 * SIGPIPE (SIGPIPE is blocked around each write and a pending one consumed).
 *
 * A profd_jit is not safe for concurrent use: a JIT that compiles on several threads holds
 * its own lock around these calls. Define _GNU_SOURCE or _DEFAULT_SOURCE before your first
 * #include to get real thread ids in records (else the pid is used as the tid).
 */
#ifndef PROFD_JIT_H
#define PROFD_JIT_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__) && (defined(_GNU_SOURCE) || defined(_DEFAULT_SOURCE))
#include <sys/syscall.h>
#endif

#if defined(__GNUC__)
#define PROFD_JIT__API static __attribute__((unused))
#else
#define PROFD_JIT__API static
#endif

/* Return values. Negative values are errors with errno set. */
#define PROFD_JIT_OK 0
#define PROFD_JIT_NO_DAEMON 1 /* no profd FIFO for this process (or profd went away) */
#define PROFD_JIT_DROPPED 2   /* the pipe stayed full for timeout_ms; this record was dropped */
#define PROFD_JIT_PENDING 3   /* profd has not answered the flush request yet */
#define PROFD_JIT_ERROR (-1)

/* jitdump record ids (perf's jitdump specification) and profd's extension. */
#define PROFD_JIT_MAGIC 0x4A695444u /* "JiTD" */
#define PROFD_JIT_VERSION 1u
#define PROFD_JIT_CODE_LOAD 0u
#define PROFD_JIT_CODE_MOVE 1u
#define PROFD_JIT_CODE_DEBUG_INFO 2u
#define PROFD_JIT_CODE_CLOSE 3u
#define PROFD_JIT_CODE_UNLOAD 0x7F000001u
#define PROFD_JIT_FLUSH_REQUEST 0x7F000002u
#define PROFD_JIT_REPLY_MAGIC 0x31524650u /* "PFR1" */
#define PROFD_JIT_REPLY_MAX 4096          /* a reply is one write of at most PIPE_BUF bytes */
#define PROFD_JIT_REPLY_PATHS 16

/* The outputs a flush request asks for (or together; PROFD_JIT_FLUSH_ALL: every one profd
 * writes). A JIT that reads only the LLVM profile gets its answer sooner. */
#define PROFD_JIT_FLUSH_ALL 0u
#define PROFD_JIT_FLUSH_LLVM_TEXT 1u      /* <image>-<pid>.prof.txt */
#define PROFD_JIT_FLUSH_LLVM_EXTBINARY 2u /* <image>-<pid>.prof.extbinary */
#define PROFD_JIT_FLUSH_PPROF 4u          /* <image>-<pid>.pb.gz */
#define PROFD_JIT_FLUSH_CAPTURE 8u        /* <image>-<pid>.profd */

#define PROFD_JIT_PATH_MAX 4096
#define PROFD_JIT_DEFAULT_TIMEOUT_MS 100

/* One line-table entry: the code starting at addr (absolute) came from file:line. */
typedef struct profd_jit_line {
	uint64_t addr;
	uint32_t line;
	uint32_t discriminator;
	const char *file;
} profd_jit_line;

/* profd's answer to a flush request. */
typedef struct profd_jit_reply {
	uint64_t request_id;
	int status;       /* 0: the profiles were written; else the errno profd met */
	unsigned npaths;  /* the files written for this process */
	const char *paths[PROFD_JIT_REPLY_PATHS]; /* into buf */
	char buf[PROFD_JIT_REPLY_MAX];
} profd_jit_reply;

typedef struct profd_jit {
	int fd;                   /* FIFO write end; -1 when unprofiled */
	int reply_fd;             /* reply FIFO read end; -1 until a flush request needs it */
	uint32_t pid;             /* getpid() at open */
	char dir[PROFD_JIT_PATH_MAX];
	uint64_t last_code_index; /* code indexes handed out so far */
	int timeout_ms;           /* longest wait for room in a full pipe, per record */
	uint64_t records;         /* records written */
	uint64_t dropped;         /* records dropped because the pipe stayed full */
	int broken;               /* a record was cut off mid-way: the stream was closed for good */
	uint64_t last_request_id; /* flush requests sent so far */
	size_t rlen;              /* bytes of replies read and not yet taken */
	unsigned char rbuf[2 * PROFD_JIT_REPLY_MAX];
} profd_jit;

/* profd_jit_default_dir writes the FIFO directory profd uses by default into buf:
 * $PROFD_DIR, else /run/profd for root, else $XDG_RUNTIME_DIR/profd. */
PROFD_JIT__API int profd_jit_default_dir(char *buf, size_t n)
{
	const char *env = getenv("PROFD_DIR");
	int w;
	if (env != NULL && env[0] != '\0') {
		w = snprintf(buf, n, "%s", env);
	} else if (geteuid() == 0) {
		w = snprintf(buf, n, "/run/profd");
	} else {
		env = getenv("XDG_RUNTIME_DIR");
		if (env == NULL || env[0] != '/') {
			errno = ENOENT;
			return PROFD_JIT_ERROR;
		}
		w = snprintf(buf, n, "%s/profd", env);
	}
	if (w < 0 || (size_t)w >= n) {
		errno = ENAMETOOLONG;
		return PROFD_JIT_ERROR;
	}
	return PROFD_JIT_OK;
}

static uint64_t profd_jit__now(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t profd_jit__tid(void)
{
#if defined(__linux__) && defined(SYS_gettid) && (defined(_GNU_SOURCE) || defined(_DEFAULT_SOURCE))
	return (uint32_t)syscall(SYS_gettid);
#else
	return (uint32_t)getpid();
#endif
}

static unsigned char *profd_jit__u32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
	return p + 4;
}

static unsigned char *profd_jit__u64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, 8);
	return p + 8;
}

/* profd_jit__record_header writes a record's id, total_size and timestamp (16 bytes). */
static unsigned char *profd_jit__record_header(unsigned char *p, uint32_t id, uint32_t total)
{
	p = profd_jit__u32(p, id);
	p = profd_jit__u32(p, total);
	return profd_jit__u64(p, profd_jit__now());
}

static void profd_jit__disconnect(profd_jit *j)
{
	if (j->fd >= 0)
		close(j->fd);
	j->fd = -1;
	if (j->reply_fd >= 0)
		close(j->reply_fd);
	j->reply_fd = -1;
}

/* profd_jit__wait_writable waits for room in the pipe until deadline (CLOCK_MONOTONIC ns). */
static int profd_jit__wait_writable(int fd, uint64_t deadline)
{
	for (;;) {
		uint64_t now = profd_jit__now();
		struct pollfd pfd;
		int rc;
		if (now >= deadline)
			return 0;
		pfd.fd = fd;
		pfd.events = POLLOUT;
		pfd.revents = 0;
		rc = poll(&pfd, 1, (int)((deadline - now + 999999u) / 1000000u));
		if (rc > 0)
			return 1; /* writable, or an error the next write reports */
		if (rc < 0 && errno != EINTR)
			return 0;
	}
}

/* profd_jit__fits reports whether a record of need bytes surely fits in the pipe now (1 where
 * that cannot be told). The kernel fills a pipe by pages and a write may leave part of a page
 * unused, so the bytes queued are counted twice and a page is kept spare. Waiting for room
 * first means a record that does not fit is dropped whole instead of being cut off mid-way. */
static int profd_jit__fits(int fd, size_t need)
{
#if defined(F_GETPIPE_SZ) && defined(FIONREAD)
	int capacity = fcntl(fd, F_GETPIPE_SZ), queued = 0;
	if (capacity <= 0 || need + 4096 > (size_t)capacity || ioctl(fd, FIONREAD, &queued) != 0)
		return 1; /* unknown, or larger than the pipe: written in pieces as profd reads */
	return 2 * (size_t)queued + need + 4096 <= (size_t)capacity;
#else
	(void)fd;
	(void)need;
	return 1;
#endif
}

/* profd_jit__emit writes one whole record gathered from iov. SIGPIPE is blocked meanwhile
 * and one it raised is consumed, so a vanished profd shows as EPIPE, never as death. */
static int profd_jit__emit(profd_jit *j, struct iovec *iov, int iovcnt)
{
	sigset_t pipeset, oldset, pending;
	int sigpipe_was_pending, rc = PROFD_JIT_OK, saved_errno = 0;
	size_t done = 0, total = 0;
	uint64_t start, deadline;
	int i;

	if (j->fd < 0)
		return PROFD_JIT_NO_DAEMON;
	for (i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;

	sigemptyset(&pipeset);
	sigaddset(&pipeset, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipeset, &oldset);
	sigemptyset(&pending);
	sigpending(&pending);
	sigpipe_was_pending = sigismember(&pending, SIGPIPE);

	start = profd_jit__now();
	deadline = start + (uint64_t)j->timeout_ms * 1000000u;
	while (!profd_jit__fits(j->fd, total)) {
		struct timespec ms = {0, 1000000};
		if (profd_jit__now() >= deadline) {
			j->dropped++;
			rc = PROFD_JIT_DROPPED;
			goto out;
		}
		nanosleep(&ms, NULL);
	}
	while (done < total) {
		ssize_t n = writev(j->fd, iov, iovcnt);
		if (n > 0) {
			done += (size_t)n;
			while (iovcnt > 0 && (size_t)n >= iov[0].iov_len) {
				n -= (ssize_t)iov[0].iov_len;
				iov++;
				iovcnt--;
			}
			if (iovcnt > 0) {
				iov[0].iov_base = (char *)iov[0].iov_base + n;
				iov[0].iov_len -= (size_t)n;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			/* A record already begun must finish or the stream is garbage: it gets
			 * ten times longer than one not yet started. */
			uint64_t limit = done == 0 ? deadline : start + 10u * (uint64_t)j->timeout_ms * 1000000u;
			if (profd_jit__wait_writable(j->fd, limit))
				continue;
			if (done == 0) {
				j->dropped++;
				rc = PROFD_JIT_DROPPED;
			} else {
				j->broken = 1;
				profd_jit__disconnect(j);
				saved_errno = ETIMEDOUT;
				rc = PROFD_JIT_ERROR;
			}
			break;
		}
		if (n < 0 && errno == EPIPE) {
			profd_jit__disconnect(j); /* profd went away: run on unprofiled */
			rc = PROFD_JIT_NO_DAEMON;
			break;
		}
		saved_errno = n < 0 ? errno : EIO;
		profd_jit__disconnect(j);
		rc = PROFD_JIT_ERROR;
		break;
	}
	if (done == total)
		j->records++;
out:

	if (!sigpipe_was_pending) {
		struct timespec zero = {0, 0};
		sigpending(&pending);
		if (sigismember(&pending, SIGPIPE))
			while (sigtimedwait(&pipeset, NULL, &zero) < 0 && errno == EINTR) {
			}
	}
	pthread_sigmask(SIG_SETMASK, &oldset, NULL);
	if (rc == PROFD_JIT_ERROR)
		errno = saved_errno;
	return rc;
}

/* profd_jit__header sends the jitdump file header. */
static int profd_jit__header(profd_jit *j)
{
	unsigned char hdr[40], *p;
	struct iovec iov;

	p = profd_jit__u32(hdr, PROFD_JIT_MAGIC);
	p = profd_jit__u32(p, PROFD_JIT_VERSION);
	p = profd_jit__u32(p, (uint32_t)sizeof(hdr));
#if defined(__x86_64__)
	p = profd_jit__u32(p, 62); /* EM_X86_64 */
#elif defined(__aarch64__)
	p = profd_jit__u32(p, 183); /* EM_AARCH64 */
#else
	p = profd_jit__u32(p, 0);
#endif
	p = profd_jit__u32(p, 0); /* pad */
	p = profd_jit__u32(p, j->pid);
	p = profd_jit__u64(p, profd_jit__now());
	profd_jit__u64(p, 0); /* flags */
	iov.iov_base = hdr;
	iov.iov_len = sizeof(hdr);
	return profd_jit__emit(j, &iov, 1);
}

/* profd_jit_open connects to profd's FIFO <dir>/<pid>.map (dir NULL: the default) and sends
 * the jitdump file header. PROFD_JIT_NO_DAEMON: no profd listens for this process; the
 * handle stays usable and every call on it does nothing. */
PROFD_JIT__API int profd_jit_open(profd_jit *j, const char *dir)
{
	char path[PROFD_JIT_PATH_MAX + 32];
	struct stat st;
	int w;

	memset(j, 0, sizeof(*j));
	j->fd = -1;
	j->reply_fd = -1;
	j->pid = (uint32_t)getpid();
	j->timeout_ms = PROFD_JIT_DEFAULT_TIMEOUT_MS;
	if (dir == NULL) {
		if (profd_jit_default_dir(j->dir, sizeof(j->dir)) != 0)
			return PROFD_JIT_NO_DAEMON;
	} else {
		w = snprintf(j->dir, sizeof(j->dir), "%s", dir);
		if (w < 0 || (size_t)w >= sizeof(j->dir)) {
			errno = ENAMETOOLONG;
			return PROFD_JIT_ERROR;
		}
	}
	snprintf(path, sizeof(path), "%s/%lu.map", j->dir, (unsigned long)j->pid);
	j->fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (j->fd < 0) {
		if (errno == ENXIO || errno == ENOENT)
			return PROFD_JIT_NO_DAEMON; /* no FIFO, or no reader on it */
		return PROFD_JIT_ERROR;
	}
	if (fstat(j->fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
		profd_jit__disconnect(j);
		errno = EINVAL;
		return PROFD_JIT_ERROR;
	}

	return profd_jit__header(j);
}

/* profd_jit_open_file writes the records into a new jitdump file at path instead (mode 0644;
 * an existing file or a symlink there is an error), which profd and perf read: name it
 * jit-<pid>.dump in a directory they search ($JITDUMPDIR/.debug/jit/<subdir>/ and the like),
 * or pass PROFD_JIT_MARK to map its first page executable, as perf requires and by which both
 * find it wherever it is. */
#define PROFD_JIT_MARK 1
PROFD_JIT__API int profd_jit_open_file(profd_jit *j, const char *path, int flags)
{
	memset(j, 0, sizeof(*j));
	j->reply_fd = -1;
	j->pid = (uint32_t)getpid();
	j->timeout_ms = PROFD_JIT_DEFAULT_TIMEOUT_MS;
	j->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (j->fd < 0)
		return PROFD_JIT_ERROR;
	if (profd_jit__header(j) != PROFD_JIT_OK)
		return PROFD_JIT_ERROR;
	if ((flags & PROFD_JIT_MARK) &&
	    mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_EXEC, MAP_PRIVATE, j->fd, 0) == MAP_FAILED)
		return PROFD_JIT_ERROR;
	return PROFD_JIT_OK;
}

/* profd_jit_code_load announces size bytes of code at addr named name, with an optional line
 * table (nlines entries, ascending addr; sent first, as a CODE_DEBUG_INFO record). code
 * points to the bytes to send; NULL sends the size bytes at addr in this process (the code
 * itself, which must then be readable). The code index profd will
 * know this code by is stored in *code_index when that is not NULL. */
PROFD_JIT__API int profd_jit_code_load(profd_jit *j, const char *name, uint64_t addr, uint64_t size,
                                       const void *code, const profd_jit_line *lines, size_t nlines,
                                       uint64_t *code_index)
{
	unsigned char fixed[56], *p;
	struct iovec iov[3];
	size_t namelen;
	uint64_t total;
	uint64_t idx = ++j->last_code_index;
	int rc;

	if (code_index != NULL)
		*code_index = idx;
	if (j->fd < 0)
		return PROFD_JIT_NO_DAEMON;
	if (name == NULL)
		name = "";
	namelen = strlen(name) + 1;

	if (lines != NULL && nlines > 0) {
		/* CODE_DEBUG_INFO: header, code_addr, nr_entry, then {addr, line, discrim, file\0}. */
		unsigned char dhead[32];
		struct iovec *div;
		unsigned char *ents;
		size_t i, entbytes = 0;
		uint64_t dtotal;
		for (i = 0; i < nlines; i++)
			entbytes += 16 + strlen(lines[i].file != NULL ? lines[i].file : "") + 1;
		dtotal = sizeof(dhead) + entbytes;
		if (dtotal > UINT32_MAX) {
			errno = EINVAL;
			return PROFD_JIT_ERROR;
		}
		ents = (unsigned char *)malloc(entbytes);
		if (ents == NULL)
			return PROFD_JIT_ERROR;
		p = ents;
		for (i = 0; i < nlines; i++) {
			const char *f = lines[i].file != NULL ? lines[i].file : "";
			size_t flen = strlen(f) + 1;
			p = profd_jit__u64(p, lines[i].addr);
			p = profd_jit__u32(p, lines[i].line);
			p = profd_jit__u32(p, lines[i].discriminator);
			memcpy(p, f, flen);
			p += flen;
		}
		p = profd_jit__record_header(dhead, PROFD_JIT_CODE_DEBUG_INFO, (uint32_t)dtotal);
		p = profd_jit__u64(p, addr);
		profd_jit__u64(p, (uint64_t)nlines);
		div = iov;
		div[0].iov_base = dhead;
		div[0].iov_len = sizeof(dhead);
		div[1].iov_base = ents;
		div[1].iov_len = entbytes;
		rc = profd_jit__emit(j, div, 2);
		free(ents);
		if (rc != PROFD_JIT_OK)
			return rc;
	}

	/* CODE_LOAD: header, pid, tid, vma, code_addr, code_size, code_index, name\0, code. */
	if (code == NULL)
		code = (const void *)(uintptr_t)addr;
	total = sizeof(fixed) + namelen + size;
	if (total > UINT32_MAX) {
		errno = EINVAL;
		return PROFD_JIT_ERROR;
	}
	p = profd_jit__record_header(fixed, PROFD_JIT_CODE_LOAD, (uint32_t)total);
	p = profd_jit__u32(p, j->pid);
	p = profd_jit__u32(p, profd_jit__tid());
	p = profd_jit__u64(p, addr); /* vma */
	p = profd_jit__u64(p, addr);
	p = profd_jit__u64(p, size);
	profd_jit__u64(p, idx);
	iov[0].iov_base = fixed;
	iov[0].iov_len = sizeof(fixed);
	iov[1].iov_base = (void *)name;
	iov[1].iov_len = namelen;
	iov[2].iov_base = (void *)code;
	iov[2].iov_len = (size_t)size;
	return profd_jit__emit(j, iov, size > 0 ? 3 : 2);
}

/* profd_jit_code_unload says the code loaded at addr under code_index is gone (its range may
 * be reused from now on). */
PROFD_JIT__API int profd_jit_code_unload(profd_jit *j, uint64_t addr, uint64_t code_index)
{
	unsigned char rec[40], *p;
	struct iovec iov;
	if (j->fd < 0)
		return PROFD_JIT_NO_DAEMON;
	p = profd_jit__record_header(rec, PROFD_JIT_CODE_UNLOAD, (uint32_t)sizeof(rec));
	p = profd_jit__u32(p, j->pid);
	p = profd_jit__u32(p, profd_jit__tid());
	p = profd_jit__u64(p, addr);
	profd_jit__u64(p, code_index);
	iov.iov_base = rec;
	iov.iov_len = sizeof(rec);
	return profd_jit__emit(j, &iov, 1);
}

/* profd_jit_code_move says the size bytes of code_index moved from old_addr to new_addr. */
PROFD_JIT__API int profd_jit_code_move(profd_jit *j, uint64_t old_addr, uint64_t new_addr, uint64_t size,
                                       uint64_t code_index)
{
	unsigned char rec[64], *p;
	struct iovec iov;
	if (j->fd < 0)
		return PROFD_JIT_NO_DAEMON;
	p = profd_jit__record_header(rec, PROFD_JIT_CODE_MOVE, (uint32_t)sizeof(rec));
	p = profd_jit__u32(p, j->pid);
	p = profd_jit__u32(p, profd_jit__tid());
	p = profd_jit__u64(p, new_addr); /* vma */
	p = profd_jit__u64(p, old_addr);
	p = profd_jit__u64(p, new_addr);
	p = profd_jit__u64(p, size);
	profd_jit__u64(p, code_index);
	iov.iov_base = rec;
	iov.iov_len = sizeof(rec);
	return profd_jit__emit(j, &iov, 1);
}

/* profd_jit_flush_request asks profd to write this process's profiles now: the outputs in
 * formats (PROFD_JIT_FLUSH_*). The request goes through the FIFO, after the records sent
 * before it (profd applies those first): no signal, so it works whatever user profd runs
 * as, and flushes only this process. Its id is stored in *request_id when that is not NULL;
 * profd_jit_flush_poll reads the answer. PROFD_JIT_NO_DAEMON without a FIFO (a jitdump
 * file is no channel to profd). */
PROFD_JIT__API int profd_jit_flush_request(profd_jit *j, unsigned formats, uint64_t *request_id)
{
	unsigned char rec[40], *p;
	struct iovec iov;
	uint64_t id;
	int rc;
	if (j->fd < 0 || j->dir[0] == '\0')
		return PROFD_JIT_NO_DAEMON;
	id = j->last_request_id + 1;
	p = profd_jit__record_header(rec, PROFD_JIT_FLUSH_REQUEST, (uint32_t)sizeof(rec));
	p = profd_jit__u32(p, j->pid);
	p = profd_jit__u32(p, profd_jit__tid());
	p = profd_jit__u64(p, id);
	p = profd_jit__u32(p, (uint32_t)formats);
	profd_jit__u32(p, 0); /* reserved */
	iov.iov_base = rec;
	iov.iov_len = sizeof(rec);
	rc = profd_jit__emit(j, &iov, 1);
	if (rc == PROFD_JIT_OK) {
		j->last_request_id = id;
		if (request_id != NULL)
			*request_id = id;
	}
	return rc;
}

/* profd_jit__open_reply opens <dir>/<pid>.reply, which profd made for this process. */
static int profd_jit__open_reply(profd_jit *j)
{
	char path[PROFD_JIT_PATH_MAX + 32];
	struct stat st;
	if (j->reply_fd >= 0)
		return PROFD_JIT_OK;
	if (j->dir[0] == '\0')
		return PROFD_JIT_NO_DAEMON;
	snprintf(path, sizeof(path), "%s/%lu.reply", j->dir, (unsigned long)j->pid);
	j->reply_fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (j->reply_fd < 0)
		return errno == ENOENT ? PROFD_JIT_NO_DAEMON : PROFD_JIT_ERROR;
	if (fstat(j->reply_fd, &st) != 0 || !S_ISFIFO(st.st_mode)) {
		close(j->reply_fd);
		j->reply_fd = -1;
		errno = EINVAL;
		return PROFD_JIT_ERROR;
	}
	return PROFD_JIT_OK;
}

static uint32_t profd_jit__get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* profd_jit_flush_poll looks, without waiting, for profd's answer to request_id:
 * PROFD_JIT_OK with *reply filled in, PROFD_JIT_PENDING while it has not come,
 * PROFD_JIT_NO_DAEMON when profd went away. Answers to earlier requests are passed over
 * (profd answers every request, in order; requests made while a flush runs are answered
 * together by the next one). */
PROFD_JIT__API int profd_jit_flush_poll(profd_jit *j, uint64_t request_id, profd_jit_reply *reply)
{
	int rc = profd_jit__open_reply(j);
	if (rc != PROFD_JIT_OK)
		return rc;
	for (;;) {
		while (j->rlen >= 24) {
			uint32_t total = profd_jit__get32(j->rbuf + 4), n, i;
			uint64_t id;
			size_t off;
			if (profd_jit__get32(j->rbuf) != PROFD_JIT_REPLY_MAGIC || total < 24 || total > PROFD_JIT_REPLY_MAX) {
				j->rlen = 0; /* not profd's: drop what was read */
				errno = EPROTO;
				return PROFD_JIT_ERROR;
			}
			if (j->rlen < total)
				break;
			memcpy(&id, j->rbuf + 8, 8);
			if (id == request_id) {
				int32_t status;
				memcpy(&status, j->rbuf + 16, 4);
				n = profd_jit__get32(j->rbuf + 20);
				reply->request_id = id;
				reply->status = status;
				reply->npaths = 0;
				memcpy(reply->buf, j->rbuf + 24, total - 24);
				for (i = 0, off = 0; i < n && off < total - 24 && reply->npaths < PROFD_JIT_REPLY_PATHS; i++) {
					size_t len = strnlen(reply->buf + off, total - 24 - off);
					if (off + len >= total - 24)
						break; /* no NUL: not a path */
					reply->paths[reply->npaths++] = reply->buf + off;
					off += len + 1;
				}
			}
			memmove(j->rbuf, j->rbuf + total, j->rlen - total);
			j->rlen -= total;
			if (id == request_id)
				return PROFD_JIT_OK;
		}
		{
			ssize_t n = read(j->reply_fd, j->rbuf + j->rlen, sizeof(j->rbuf) - j->rlen);
			if (n > 0) {
				j->rlen += (size_t)n;
				continue;
			}
			if (n == 0)
				return PROFD_JIT_NO_DAEMON; /* profd closed its end: it stopped */
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return PROFD_JIT_PENDING;
			return PROFD_JIT_ERROR;
		}
	}
}

/* profd_jit_flush_wait asks for this process's profiles (profd_jit_flush_request) and waits
 * up to timeout_ms for the answer: PROFD_JIT_OK with *reply filled in (reply->status 0 and
 * reply->paths the files written), or PROFD_JIT_PENDING when the time ran out (the answer
 * may still come: profd_jit_flush_poll with j->last_request_id). */
PROFD_JIT__API int profd_jit_flush_wait(profd_jit *j, unsigned formats, int timeout_ms, profd_jit_reply *reply)
{
	uint64_t id, deadline;
	int rc = profd_jit_flush_request(j, formats, &id);
	if (rc != PROFD_JIT_OK)
		return rc;
	deadline = profd_jit__now() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
	for (;;) {
		struct pollfd pfd;
		uint64_t now;
		rc = profd_jit_flush_poll(j, id, reply);
		if (rc != PROFD_JIT_PENDING)
			return rc;
		now = profd_jit__now();
		if (now >= deadline)
			return PROFD_JIT_PENDING;
		pfd.fd = j->reply_fd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		if (poll(&pfd, 1, (int)((deadline - now + 999999u) / 1000000u)) < 0 && errno != EINTR)
			return PROFD_JIT_ERROR;
	}
}

/* profd_jit_flush asks profd to write this process's profiles now and does not wait
 * (profd_jit_flush_request). Without a FIFO it falls back to kill(SIGUSR1) to the pid in
 * <dir>/profd.pid, which flushes every process profd profiles. */
PROFD_JIT__API int profd_jit_flush(profd_jit *j)
{
	char path[PROFD_JIT_PATH_MAX + 32], buf[32];
	ssize_t n;
	long pid;
	char *end;
	int fd;

	if (j->fd >= 0 && j->dir[0] != '\0')
		return profd_jit_flush_request(j, PROFD_JIT_FLUSH_ALL, NULL);
	if (j->dir[0] == '\0')
		return PROFD_JIT_NO_DAEMON;
	snprintf(path, sizeof(path), "%s/profd.pid", j->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? PROFD_JIT_NO_DAEMON : PROFD_JIT_ERROR;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return PROFD_JIT_NO_DAEMON;
	buf[n] = '\0';
	pid = strtol(buf, &end, 10);
	if (pid <= 0 || end == buf)
		return PROFD_JIT_NO_DAEMON;
	if (kill((pid_t)pid, SIGUSR1) != 0)
		return errno == ESRCH ? PROFD_JIT_NO_DAEMON : PROFD_JIT_ERROR;
	return PROFD_JIT_OK;
}

/* profd_jit_close sends CODE_CLOSE (no more records) and closes the FIFO. */
PROFD_JIT__API int profd_jit_close(profd_jit *j)
{
	unsigned char rec[16];
	struct iovec iov;
	int rc;
	if (j->fd < 0)
		return PROFD_JIT_NO_DAEMON;
	profd_jit__record_header(rec, PROFD_JIT_CODE_CLOSE, (uint32_t)sizeof(rec));
	iov.iov_base = rec;
	iov.iov_len = sizeof(rec);
	rc = profd_jit__emit(j, &iov, 1);
	profd_jit__disconnect(j);
	return rc;
}

#endif /* PROFD_JIT_H */
