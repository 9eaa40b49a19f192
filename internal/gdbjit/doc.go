// Package gdbjit reads, from a live process, the debug objects its JIT registered with the
// GDB JIT interface, and decodes their DWARF line tables and subprograms (jitmap.DebugObject)
// and their functions (jitmap.ObjectFunctions).
//
// LLVM's MCJIT (lli-14 -jit-kind=mcjit) registers every object it loads: the exported
// variable __jit_debug_descriptor {u32 version, u32 action, entry *relevant, entry *first}
// heads a doubly linked list of {next, prev, symfile_addr, symfile_size} entries, each naming
// an in-memory ELF object whose loaded sections carry their load addresses. Its line table is
// the one the JIT's jitdump line records come from, plus what they leave out: the DWARF
// discriminators that tell apart code of one source line in different blocks (a loop's
// header, body and latch; vector and remainder loops), and each function's declared line,
// from which LLVM's sample profiles count line offsets. internal/enrich puts both on the
// code loads (jitmap.MergeDiscriminators, jitmap.FirstLineAt).
//
//	r := gdbjit.NewReader(gdbjit.Options{})
//	info, err := r.Debug(pid) // every registered object's rows and subprograms, by address
//	if err == nil {
//		jitmap.MergeDiscriminators(&load.Object, info.Lines)
//		load.Object.FirstLine = jitmap.FirstLineAt(info.Subprograms, load.Object.Addr)
//	}
//	r.Forget(pid) // when the process is gone
//
// Changes reports the functions of the objects registered since its last call (their
// symbols at their load addresses, with their line rows), for the daemon to name the code
// of a JIT that writes no jitdump or perf map, and those of objects no longer listed.
// FrameSections finds where the JIT loaded each object's .eh_frame, for internal/unwind to
// walk JIT code without frame pointers: only the objects' headers are read.
//
// The descriptor is looked up in the dynamic symbols of the process's executable and of the
// libraries it maps whose file name starts with "libLLVM" (by their .gnu.hash tables), each opened as it is mapped
// (procfs.OpenMapped) and read up to a bound; processes without one get ErrNoDescriptor.
// Everything read from the process is untrusted: the list walk is bounded (entries, object
// sizes, cycles), so are the bytes one walk reads and the decoded objects kept (for each
// process and for all), and objects are decoded by jitmap's bounded decoder. A walk reads
// the process's memory under procmem.Guard, its entries under one guard and its new objects
// under others, a group of up to MaxObjectBytes each, so a process whose memory does not
// answer holds a walk ReadTimeout at most.
// Reading needs ptrace-attach rights over the process (root, or the same user without Yama).
//
// A Reader is safe for concurrent use.
package gdbjit
