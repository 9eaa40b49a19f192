// Package execmaps keeps the executable mappings that processes make, as the kernel
// reports them to perf (mmap records), so that the samples of a process that exited before
// its /proc/PID/maps was read can still be placed in the files they ran in.
//
// A process that lives a few milliseconds under --all (a compiler, a shell's pipeline) is
// often gone when its first samples are attributed; /proc then has nothing of it. The
// kernel writes a record for each executable mapping as it is made (its file, offset,
// device and inode), for every process, into one ring per CPU; Log reads them and keeps,
// for each process, the mappings it made, and a forked child's parent's up to the fork (a
// parent that began before the records: its /proc/PID/maps while it runs). Mappings are
// unmapped without a record, so a later mapping of the same addresses replaces an earlier
// one, as perf's own report does, and what a process ran before its exec names only the
// addresses its new program does not map. It also tells which file a process ran.
//
// It needs system-wide perf events (root, CAP_PERFMON, or perf_event_paranoid below 1);
// Start fails without them, and profd goes on without it. What it keeps is bounded: a
// process's mappings are let go of 10 s after its exit, and past
// 2^18 mappings in all the exited processes go first, then new mappings are not
// kept (with one warning).
package execmaps
