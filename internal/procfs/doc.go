// Package procfs reads what profd needs of a process from /proc: when it started (which
// tells it from an earlier process with the same pid), its executable and command name, its
// mappings, its owner and the pid it has in its own namespace, chosen environment variables
// (and the OpenTelemetry service name they give), its command line, its cgroup and the
// container that names (ContainerID, a parser of the path alone), and the path of its root
// directory (its mount namespace's view of the file system); and it opens the files a
// process maps or names, as the process sees them (OpenMapped, OpenFile).
//
//	at, err := procfs.StartedAt(pid)
//	maps, err := procfs.ReadMaps(pid)
//	st, err := procfs.ReadStatus(pid) // st.UID, st.GID, st.NSpid
//	cg, err := procfs.ReadCgroup(pid)
//	id := procfs.ContainerID(cg.Path) // "" outside a container
//	f, err := procfs.OpenMapped(pid, m.Start, m.End, m.Path, m.ID())
//
// /proc is read as hostile input: every read is bounded, lines that do not parse are
// skipped, and a process that exits meanwhile makes the call fail with an error wrapping
// fs.ErrNotExist or ErrExited. So are the files a process names: profd opens them without
// blocking, and only a regular file, the one a mapping maps or one the process's user may
// read, and none on a FUSE mount of the process (ErrFUSE, RefuseFUSE: a FUSE server may
// hold an open for good). OnlineCPUs reads /sys: the CPUs a per-CPU perf event can be opened on.
// Functions are safe for concurrent use.
package procfs
