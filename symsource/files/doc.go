// Package files reads the symbol files JITs write for perf: jitdump files (jit-PID.dump)
// and perf maps (perf-PID.map), found as they appear (inotify on the directories they go
// in) and read as they grow, each decoded (package jitmap) into batches of symbol events for
// the caller, like the FIFOs of package fifo.
//
// Files are opened without following symlinks and must be regular files owned by the
// target's user or root (ErrNotRegular) that the target's user may read by their mode
// (ErrNotReadable: profd reads as root, the target's user reads its outputs); a file last written before its target started is an
// earlier process's with the same pid and is not read until it is written again.
//
//	t, err := files.Start(ctx, files.Config{Handler: stage.Add, Logger: logger})
//	t.AddTarget(pid, uid)
//	t.RemoveTarget(pid) // reads what the files hold, then stops tailing them
//	t.Close()
//
// The Tailer's methods are safe for concurrent use; the Handler runs on its goroutine.
package files
