// Package jitmap decodes the symbol records JIT runtimes write (the Linux perf jitdump format
// and perf-map text) and keeps, per process, the code objects they describe, so that a
// sampled instruction pointer can be named: which function owned that address at that time,
// at what offset, and with what code bytes and line table.
//
// A Decoder turns one byte stream (a FIFO, a jit-PID.dump or a perf-PID.map file) into
// Events, whatever pieces the stream arrives in; a Map applies them and answers lookups:
//
//	m := jitmap.NewMap(jitmap.MapOptions{})
//	d := jitmap.NewDecoder(pid, codeobj.SourceFIFO, jitmap.DecoderOptions{Now: monotonicNs})
//	for {
//		n, err := fifo.Read(buf)
//		events, errs := d.Write(buf[:n])
//		for _, ev := range events {
//			m.Apply(ev) // an error here names code that is not live; log it
//		}
//		for _, e := range errs {
//			log.Warn("jit symbols", "pid", pid, "err", e) // *DecodeError with its offset
//		}
//		if d.Err() != nil || err != nil {
//			break // ErrStreamDead: the stream cannot be trusted any more
//		}
//	}
//	obj, ok := m.Lookup(pid, ip, sampleTimeNs) // from the sample drain, concurrently
//
// DebugObject decodes another source of line tables: the in-memory ELF objects a JIT
// registers with the GDB JIT interface (LLVM's MCJIT does), whose DWARF rows carry the
// discriminators lli-14's jitdump leaves out, and whose subprograms give each function's
// declared line; MergeDiscriminators copies the discriminators onto a code object's line
// entries, FirstLineAt finds the line (internal/gdbjit reads the objects from a live process).
//
// Formats: see DetectFormat, Decoder and docs/jitdump-extensions.md (profd's unload record,
// LLVM 14's quirks, the bounds on record sizes).
//
// Concurrency: a Decoder belongs to one goroutine. Map.Apply (from the FIFO readers) and
// Map.Lookup (from the sample drain) may run at the same time; see Map.
//
// jitmap imports only profd's codeobj, the leaf package of the code objects it keeps.
package jitmap
