// Package fifo is the transport between a JIT runtime and profd: the private FIFO directory
// and one named pipe per target process, each read as the JIT writes and decoded (package
// jitmap) into batches of symbol events for the caller, and the flush-request protocol both
// ways (what a request asks for, the queue of pending ones, the replies and their encoding:
// flush.go, reply_linux.go).
//
// The directory (default /run/profd as root, else $XDG_RUNTIME_DIR/profd) is made mode 0711
// and refused (ErrUnsafeDir) when it is a symlink, belongs to another user, or is group or
// other writable; profd.pid in it names the daemon, for JITs that ask for a flush with
// SIGUSR1. Each target gets <dir>/<pid>.map, a FIFO owned by the target's effective user,
// mode 0600, made with mkfifoat and opened O_NOFOLLOW relative to the directory descriptor;
// a symlink or any other file already there is refused (ErrNotFIFO).
//
// Each writer session (open to close) is one jitmap.Stream: its first bytes choose the
// format (the jitdump magic in either byte order, else perf-map text), and a session that
// follows another with no end-of-file seen in between is recognised by its header. Bad
// records come in the batch's Errs with their byte offsets; records naming another process
// are dropped and counted. Each FIFO's reader waits on the runtime's network poller
// (package fdwait), so an idle FIFO holds no thread, and takes a read buffer
// (Config.ReadBufferBytes, which bounds a read) from a pool only while there are bytes to
// read. The decoder's buffer is bounded too (Config.Decoder).
//
//	srv, err := fifo.Start(ctx, fifo.Config{
//		Handler: func(b jitmap.Batch) { stage.Add(b) }, // b.Events, b.Errs of target b.Pid
//		Logger:  logger,
//	})
//	if err != nil { ... }
//	defer srv.Close() // stops the readers, removes the FIFOs, profd.pid and the directory
//	err = srv.AddTarget(pid, fifo.Owner{UID: uid, GID: gid})
//
// The FIFOs carry a protocol both ways: a JIT asks for its profiles now with a flush
// request in its stream (jitmap.FlushRequest), and reads the answer, a FlushReply, on its
// reply FIFO <dir>/<pid>.reply. This package owns it: what a request asks (FlushLLVMText,
// ...), how many may wait (FlushQueue), and each reply's paths, status and encoding
// (FlushRequests.Answers, Server.Reply); the daemon decides when to flush.
//
// JIT runtimes write to their FIFO with the C header library jit/profd_jit.h; see
// docs/jit-runtime.md. Server methods are safe for concurrent use, but the Handler must not
// call AddTarget, RemoveTarget or Close.
package fifo
