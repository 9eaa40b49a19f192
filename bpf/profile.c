//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0)
//
// profd's sampling program. It runs on every overflow of the per-CPU perf
// events the sampler opens, keeps only samples of the target processes
// (tgids in the `targets` map; or, with all_but_tgid, every process's user-mode
// samples) and counts them per (tgid, user ip) in the hash
// map held in one of the COUNT_SHARDS slots of `counts`, with the times of
// the key's first and last sample since the last drain, chosen by a hash of
// the key, so the loader can read the shards on several CPUs at once (it puts
// one map in both slots when the maps are small). To drain, the loader puts
// fresh hash maps in the slots with one batch update, which returns after an
// RCU grace period (every program run that found an old map has then
// returned), and reads the old maps at leisure, so no count that arrives
// during a drain is lost, and nothing has to be deleted.
//
// Reading a hash map walks all its buckets, however few keys it holds, so the
// loader sizes each shard's map to the keys it has been seeing, and a key that
// finds it full goes to the shard's overflow map, in slot COUNT_SHARDS + shard
// (sized to make up the shard's capacity; the loader installs the shard's map
// there too when that one has the full capacity). STAT_OVERFLOW counts those
// samples, so the loader reads an overflow map only when it was used.
//
// Kernel-mode samples (only taken when the sampler asks for them) are not
// attributed to an address: they are counted apart in STAT_KERNEL.
//
// The register layout below is x86-64's struct pt_regs (the uapi
// bpf_perf_event_data on that architecture); the loader refuses other
// architectures. It is written out here so the build needs no kernel
// headers beyond linux/bpf.h and libbpf's bpf_helpers.h.

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct x86_64_regs {
	__u64 r15, r14, r13, r12, rbp, rbx, r11, r10, r9, r8;
	__u64 rax, rcx, rdx, rsi, rdi, orig_rax;
	__u64 ip, cs, flags, sp, ss;
};

struct perf_event_ctx {
	struct x86_64_regs regs;
	__u64 sample_period;
	__u64 addr;
};

struct sample_key {
	__u32 tgid;
	__u32 pad;
	__u64 ip;
};

// A key's samples since the last drain: how many, and the CLOCK_MONOTONIC
// times of the first and the last (the clock of jitdump records), so the
// daemon can name samples by the code that was at their address at their
// time without a drain at every change of the JIT's code.
struct sample_value {
	__u64 count;
	__u64 first_ns;
	__u64 last_ns;
};

enum stat_index {
	STAT_SAMPLES = 0, // counted into a counts map
	STAT_OUTSIDE = 1, // not a target process
	STAT_DROPPED = 2, // counts map full
	STAT_KERNEL = 3,  // target, but in kernel mode
	STAT_OVERFLOW = 4, // went to an overflow map (also counted in one of the above)
	STAT_COUNT = 5,
};

#define PROFD_E2BIG 7
#define PROFD_EEXIST 17

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps");

#define COUNT_SHARDS 2

// The counts maps are not preallocated: a fresh one costs nothing to create.
// (The loader preallocates them on kernels that refuse that to perf_event
// programs.)
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2 * COUNT_SHARDS); // the shards' maps, then their overflow maps
	__type(key, __u32);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_HASH);
		__uint(max_entries, 262144);
		__uint(map_flags, BPF_F_NO_PREALLOC);
		// Sizes, not __type: clang leaves a struct that only an inner map
		// names as a forward declaration in BTF.
		__uint(key_size, sizeof(struct sample_key));
		__uint(value_size, sizeof(struct sample_value));
	});
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void bump(__u32 index)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &index);
	if (v)
		*v += 1; // per-CPU slot: no other writer
}

// all_but_tgid: the loader sets it to profd's own tgid to have every other process's
// user-mode samples counted, targets or not (profd --all: a process of a few milliseconds
// is gone before profd can make it a target, and the daemon adds it from its samples).
// Kernel-mode samples are still only counted for targets: a kernel thread has no user code.
const volatile __u32 all_but_tgid = 0;

// all_by_uid narrows all_but_tgid to the processes whose real user is in all_uids (profd
// --all --uid): the loader sets both.
const volatile __u8 all_by_uid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u8);
} all_uids SEC(".maps");

// all_by_cgroup narrows all_but_tgid to the processes in, or below, the cgroup v2
// directories whose ids (their inode numbers) are in all_cgroups (profd --all --cgroup,
// --container): the loader sets it, and the daemon keeps the map's ids as directories are
// made again and containers found. With all_by_uid too, a process must pass both.
const volatile __u8 all_by_cgroup = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u64);
	__type(value, __u8);
} all_cgroups SEC(".maps");

// MAX_CGROUP_DEPTH bounds the walk up a process's cgroup path: a cgroup deeper than this is
// matched by the daemon's watcher alone.
#define MAX_CGROUP_DEPTH 32

// in_cgroups reports whether the current task's cgroup v2 directory, or one of its
// ancestors, is in all_cgroups: at most one lookup per level, root first.
static __always_inline int in_cgroups(void)
{
	for (int level = 0; level < MAX_CGROUP_DEPTH; level++) {
		__u64 id = bpf_get_current_ancestor_cgroup_id(level);
		if (!id)
			return 0; // past the task's own cgroup
		if (bpf_map_lookup_elem(&all_cgroups, &id))
			return 1;
	}
	return 0;
}

// is_target reports whether a sample of tgid, in user mode or not, is counted: tgid is a
// target, or all_but_tgid asks for every process's user-mode samples (of the users in
// all_uids, with all_by_uid; in the cgroups of all_cgroups, with all_by_cgroup). It counts
// the sample in STAT_OUTSIDE when it is not.
static __always_inline int is_target(__u32 tgid, int user_mode)
{
	if (bpf_map_lookup_elem(&targets, &tgid))
		return 1;
	if (all_but_tgid && user_mode && tgid != all_but_tgid && tgid != 0) {
		__u32 uid = (__u32)bpf_get_current_uid_gid(); // the real user, as --uid matches
		if ((!all_by_uid || bpf_map_lookup_elem(&all_uids, &uid)) && (!all_by_cgroup || in_cgroups()))
			return 1;
	}
	bump(STAT_OUTSIDE);
	return 0;
}

// add counts one sample at now_ns in v. last_ns is a plain store: two CPUs
// counting the same key at once leave one of their times, either of which is
// a time the key was sampled at.
static __always_inline void add(struct sample_value *v, __u64 now_ns)
{
	__sync_fetch_and_add(&v->count, 1);
	v->last_ns = now_ns;
}

// count adds one sample at now_ns to key's value in map m, inserting the key
// if it is new. It returns 0, or -E2BIG when the map is full.
static __always_inline long count(void *m, const void *key, __u64 now_ns)
{
	struct sample_value *v = bpf_map_lookup_elem(m, key);
	if (v) {
		add(v, now_ns);
		return 0;
	}
	struct sample_value first = {.count = 1, .first_ns = now_ns, .last_ns = now_ns};
	long err = bpf_map_update_elem(m, key, &first, BPF_NOEXIST);
	if (err == -PROFD_EEXIST) {
		// Another CPU inserted the key between our lookup and update.
		v = bpf_map_lookup_elem(m, key);
		if (v) {
			add(v, now_ns);
			err = 0;
		}
	}
	return err;
}

// shard_of picks a key's slot in counts: the top bit of a Fibonacci hash of
// the key. The loader's shardOf computes the same.
static __always_inline __u32 shard_of(const struct sample_key *key)
{
	__u64 h = (key->ip ^ ((__u64)key->tgid << 32)) * 0x9E3779B97F4A7C15ULL;
	return h >> 63;
}

SEC("perf_event")
int profd_sample(struct perf_event_ctx *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!is_target(tgid, (ctx->regs.cs & 3) != 0))
		return 0;
	if ((ctx->regs.cs & 3) == 0) {
		bump(STAT_KERNEL);
		return 0;
	}
	struct sample_key key = {.tgid = tgid, .pad = 0, .ip = ctx->regs.ip};
	__u32 slot = shard_of(&key);
	void *m = bpf_map_lookup_elem(&counts, &slot);
	if (!m) {
		bump(STAT_DROPPED); // no map installed: cannot happen after Load
		return 0;
	}
	__u64 now_ns = bpf_ktime_get_ns();
	long err = count(m, &key, now_ns);
	if (err == -PROFD_E2BIG) {
		// The shard's map is full (and stays full until the next drain, so a key
		// is only ever in one of the two): count the key in the overflow map.
		bump(STAT_OVERFLOW);
		slot += COUNT_SHARDS;
		m = bpf_map_lookup_elem(&counts, &slot);
		if (m)
			err = count(m, &key, now_ns);
	}
	bump(err ? STAT_DROPPED : STAT_SAMPLES);
	return 0;
}

// The ring back end's filter (the sampler attaches it to its per-CPU events when it
// loads): a sample of a process that is not a target makes the program return 0, and the
// kernel then writes nothing to the ring, so that no other process's registers, call chain
// or stack (16 KiB a sample with --unwind dwarf) is copied for profd to throw away. Only
// `targets` and `stats` are loaded with it.
SEC("perf_event")
int profd_ring_filter(struct perf_event_ctx *ctx)
{
	return is_target(bpf_get_current_pid_tgid() >> 32, (ctx->regs.cs & 3) != 0);
}

// Call stacks (the loader attaches profd_sample_stacks instead of profd_sample when asked
// for them): each sample is counted per (tgid, tid, thread name, user frames, kernel frames)
// in the hash map in slot 0 of stack_counts, which the loader swaps at each drain as it
// does the counts maps. The key is too large for the BPF stack; it is built in a per-CPU
// scratch value, which the helpers take as a key. bpf_get_stack zeroes what it does not
// fill, so equal chains are equal keys.

#define MAX_USER_FRAMES 127  // the kernel's default perf_event_max_stack
#define MAX_KERNEL_FRAMES 64

#define STACK_KERNEL_MODE 1 // the sample was taken in kernel mode
#define STACK_TRUNCATED 2   // a chain filled its frames: most likely cut there
#define STACK_WORD_SLOT_SHIFT 3 // bits 3 to 6: which word at the stack pointer words[0] is (0 the one it points at); 7 to 10 words[1]'s; 11 to 14 words[2]'s

#define WORD_SLOTS 16     // the words at the stack pointer looked in for a return address
#define WORD_CANDIDATES 3 // the most of them kept

struct stack_key {
	__u32 tgid;
	__u32 tid;
	char comm[16];
	__u32 flags;
	__u16 nuser;
	__u16 nkernel;
	__u64 user[MAX_USER_FRAMES];
	__u64 kernel[MAX_KERNEL_FRAMES];
	__u64 words[WORD_CANDIDATES]; // words at the stack pointer that may be return addresses; 0 past the last
};

// kernel_stacks: the loader sets it to take kernel-mode samples with their kernel frames
// (else they only count in STAT_KERNEL, as with profd_sample).
const volatile __u8 kernel_stacks = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_key);
} stack_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_HASH);
		__uint(max_entries, 65536);
		__uint(map_flags, BPF_F_NO_PREALLOC);
		__uint(key_size, sizeof(struct stack_key));
		__uint(value_size, sizeof(struct sample_value));
	});
} stack_counts SEC(".maps");

// A function that has not set the frame pointer (a leaf that keeps its locals in registers,
// as libc's memcpy and Go's small loops are, or that keeps a small frame without one; every
// function at its first instruction, after it pushed the frame pointer, and at its return)
// leaves the caller's in it: the kernel's walk by frame pointers from a sample there goes
// from the function to its caller's caller, while the caller's return address is one of the
// first words at the stack pointer. So a user-mode sample keeps the first WORD_CANDIDATES of
// its first WORD_SLOTS words at the stack pointer that may be return addresses (words, and
// which word each was in the flags), and the daemon keeps one or none of them after the
// sampled instruction by the frame the function has there, as its file's frame information
// (or Go's function table) gives it: the one where the return address is. (A word could be
// a local's, or a return address an earlier call left in what is now the function's frame,
// nearer the stack pointer than its own: only the tables know.)
//
// May be a return address: for a process whose executable has Go's function table, the
// loader puts the range of that executable's code in text_ranges, and a sample there keeps
// its first word if it lies there too (Go sets the frame pointer with its frame; until the
// loader has read a target's executable, the range it gives is all addresses); elsewhere, a
// word that follows a call instruction's bytes (follows_call), or, for a process whose JIT
// code the loader puts in text_ranges (jit set: a JVM's code cache), a sample there, and a
// word that lies there too: a JIT may enter its code with a return address it pushed and a
// jump (HotSpot's interpreter does), which follows no call. A random word passes the call
// test once in a hundred and fifty or so; it costs one read of user memory, where asking
// the kernel whether the word lies in executable memory (bpf_find_vma) costs, from the
// timer's interrupt, an inter-processor interrupt to release the mapping lock.
struct text_range {
	__u64 lo, hi;
	__u32 jit; // JIT code: not Go's
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct text_range);
} text_ranges SEC(".maps");

// follows_call reports whether the 8 bytes of user memory before addr end with an x86-64
// call: E8 and a 32-bit displacement, or FF with a ModRM byte whose reg field is 2 (an
// indirect call, 2 to 7 bytes with its displacement, prefixes left out).
static __always_inline int follows_call(__u64 addr)
{
	__u8 b[8];
	// Not a read that faults: past user space, or in the first 64 KiB of a 4 GiB span, as
	// is every address below the lowest a process may map, and most pairs of 32-bit values
	// the first of which is small (a count, a flag, an index), common in frames and seldom
	// mapped: a fault costs more than the rest of the test. One function in 65 536 or so
	// whose return address lies there goes without its caller.
	if ((__u32)addr < 0x10000 || addr >= 0x800000000000ULL ||
	    bpf_probe_read_user(b, sizeof(b), (void *)(addr - sizeof(b))))
		return 0;
	if (b[3] == 0xe8)
		return 1;
	for (int k = 2; k <= 7; k++) {
		if (b[8 - k] == 0xff && ((b[8 - k + 1] >> 3) & 7) == 2)
			return 1;
	}
	return 0;
}

// words_at_sp puts in k->words the first WORD_CANDIDATES of the user words at the stack
// pointer that may be return addresses (above), and which word each is in k->flags.
static __always_inline void words_at_sp(struct perf_event_ctx *ctx, __u32 tgid, struct stack_key *k)
{
	__u64 w[WORD_SLOTS];
	int n = WORD_SLOTS;
	__u64 lo = 0, hi = 0; // JIT code the sample is in: its words there need no call test
	struct text_range *r = bpf_map_lookup_elem(&text_ranges, &tgid);
	if (r && ctx->regs.ip >= r->lo && ctx->regs.ip < r->hi) {
		if (r->jit) {
			lo = r->lo;
			hi = r->hi;
		} else {
			__u64 word;
			if (!bpf_probe_read_user(&word, sizeof(word), (void *)ctx->regs.sp) && word >= r->lo && word < r->hi)
				k->words[0] = word;
			return;
		}
	}
	if (bpf_probe_read_user(w, sizeof(w), (void *)ctx->regs.sp)) {
		// The stack's mapping ends within the words: the first alone.
		if (bpf_probe_read_user(w, sizeof(w[0]), (void *)ctx->regs.sp))
			return;
		n = 1;
	}
	__u32 found = 0;
	for (int i = 0; i < WORD_SLOTS; i++) {
		if (i >= n || found >= WORD_CANDIDATES)
			break;
		if ((w[i] >= lo && w[i] < hi) || follows_call(w[i])) {
			k->words[found] = w[i];
			k->flags |= (__u32)i << (STACK_WORD_SLOT_SHIFT + 4 * found);
			found++;
		}
	}
}

SEC("perf_event")
int profd_sample_stacks(struct perf_event_ctx *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	int kernel_mode = (ctx->regs.cs & 3) == 0;
	if (!is_target(tgid, !kernel_mode))
		return 0;
	if (kernel_mode && !kernel_stacks) {
		bump(STAT_KERNEL);
		return 0;
	}
	__u32 zero = 0;
	struct stack_key *k = bpf_map_lookup_elem(&stack_scratch, &zero);
	void *m = bpf_map_lookup_elem(&stack_counts, &zero);
	if (!k || !m) {
		bump(STAT_DROPPED); // cannot happen after Load
		return 0;
	}
	k->tgid = tgid;
	k->tid = (__u32)pid_tgid;
	bpf_get_current_comm(k->comm, sizeof(k->comm));
	k->flags = kernel_mode ? STACK_KERNEL_MODE : 0;
	__builtin_memset(k->words, 0, sizeof(k->words)); // equal chains, equal keys
	if (!kernel_mode)
		words_at_sp(ctx, tgid, k);
	long n = bpf_get_stack(ctx, k->user, sizeof(k->user), BPF_F_USER_STACK);
	if (n <= 0 && !kernel_mode) {
		// No chain (the helper failed): the sample still counts, at its instruction.
		k->user[0] = ctx->regs.ip;
		n = sizeof(__u64);
	}
	if (n < 0)
		n = 0;
	k->nuser = n / sizeof(__u64);
	if (k->nuser >= MAX_USER_FRAMES)
		k->flags |= STACK_TRUNCATED;
	k->nkernel = 0;
	if (kernel_mode) {
		long kn = bpf_get_stack(ctx, k->kernel, sizeof(k->kernel), 0);
		if (kn > 0) {
			k->nkernel = kn / sizeof(__u64);
			if (k->nkernel >= MAX_KERNEL_FRAMES)
				k->flags |= STACK_TRUNCATED;
		}
	} else {
		__builtin_memset(k->kernel, 0, sizeof(k->kernel));
	}
	long err = count(m, k, bpf_ktime_get_ns());
	if (err)
		bump(STAT_DROPPED);
	else
		bump(kernel_mode ? STAT_KERNEL : STAT_SAMPLES);
	return 0;
}

// The map-element iterator the loader runs over a drained counts map: one
// record per key, written into the iterator's seq_file, so a read() returns
// over a thousand entries. (The batch lookup syscall takes a bucket lock and
// copies out per bucket; this is somewhat cheaper.)
// The layouts are the kernel's (struct bpf_iter_meta, struct
// bpf_iter__bpf_map_elem), relocated against its BTF.
struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	__u64 session_id;
	__u64 seq_num;
} __attribute__((preserve_access_index));

struct bpf_iter__bpf_map_elem {
	struct bpf_iter_meta *meta;
	void *map;
	void *key;
	void *value;
} __attribute__((preserve_access_index));

struct count_record {
	__u32 tgid;
	__u32 pad;
	__u64 ip;
	__u64 count;
	__u64 first_ns;
	__u64 last_ns;
};

SEC("iter/bpf_map_elem")
int profd_dump(struct bpf_iter__bpf_map_elem *ctx)
{
	struct sample_key *key = ctx->key;
	struct sample_value *value = ctx->value;
	if (!key || !value)
		return 0; // the call that ends the iteration
	struct count_record r = {.tgid = key->tgid, .pad = 0, .ip = key->ip,
		.count = value->count, .first_ns = value->first_ns, .last_ns = value->last_ns};
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
