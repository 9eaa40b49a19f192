// Package fifo is profd's transport for JIT symbol records: it owns the private FIFO
// directory, one named pipe per target process, and the tailing of the jitdump and perf-map
// files JITs write anyway, and turns all of them into jitmap events.
//
// The directory (default /run/profd as root, else $XDG_RUNTIME_DIR/profd) is made mode 0711
// and refused (ErrUnsafeDir) when it is a symlink, belongs to another user, or is group or
// other writable; profd.pid in it names the daemon, for JITs that ask for a flush with
// SIGUSR1. Each target gets <dir>/<pid>.map, a FIFO owned by the target's effective user,
// mode 0600, made with mkfifoat and opened O_NOFOLLOW relative to the directory descriptor;
// a symlink or any other file already there is refused (ErrNotFIFO).
//
// A FIFO stream's first bytes choose its format (the jitdump magic in either byte order, else
// perf-map text). Each writer session (open to close) is one stream; a JIT that restarts its
// writer or exec()s starts a new one, also when profd sees no end-of-file in between (a
// jitdump header in mid-stream restarts the decoder). Bad records are logged with their byte
// offsets and skipped; records naming another process are dropped and counted. Reads are
// bounded (Config.ReadBufferBytes) and so is the decoder's buffer (Config.Decoder).
//
// Usage:
//
//	srv, err := fifo.Start(ctx, fifo.Config{
//		Handler:   func(ev fifo.Event) { jitMap.Apply(ev.Event) },
//		TailFiles: true, // also $JITDUMPDIR/.debug/jit/**/jit-PID.dump and /tmp/perf-PID.map
//		ReadCode:  true, // read perf-map symbols' code from the live process
//		Logger:    logger,
//	})
//	if err != nil { ... }
//	defer srv.Close() // stops the readers, removes the FIFOs, profd.pid and the directory
//	err = srv.AddTarget(pid)
//
// JIT runtimes write to their FIFO with the C header library jit/profd_jit.h; see
// docs/jit-runtime.md. Server methods are safe for concurrent use, but the Handler must not
// call AddTarget, RemoveTarget or Close.
package fifo
