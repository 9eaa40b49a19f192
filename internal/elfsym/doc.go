// Package elfsym names addresses in the ELF files a process maps: its executable and
// shared libraries, from their .symtab and .dynsym and from separate debug files (found by
// build-id under /usr/lib/debug/.build-id, or by .gnu_debuglink) or the compressed
// .symtab in .gnu_debugdata (Fedora's "MiniDebugInfo"), a stripped Go executable from its
// own function table (.gopclntab), read through a root
// directory so that a process in a container is named from its own files; debug files only
// when every user may read them (a process names the paths a debug file is looked for at,
// and a file's table is shared by every process that maps it).
//
//	cache := elfsym.NewCache(elfsym.Config{Logger: logger})
//	defer cache.Close()
//	f := cache.Open(file, "/proc/1234/root", "/usr/lib/postgresql/15/bin/postgres")
//	t, err := f.Wait(ctx)            // loaded in the background, once per file
//	name, ok := t.Lookup(fileOffset) // an address as an offset into the file
//
// A Go executable's table also says which calls were inlined at an address
// (Table.Inlined) and the source positions there (Table.Source); another file's come from
// its DWARF (its own or its debug file's): the line tables of .debug_line, the inlined
// subroutines of .debug_info.
//
// LookupDynamic goes the other way, from a name to a file's dynamic symbol, through its
// .gnu.hash table as the dynamic linker does. GoFrames reads from the same Go function
// table how deep each function's frame is at each instruction, for an unwinder: Go's code
// has no .eh_frame.
//
// A Table is read once per file (by build-id among the files of one owner, else by device,
// inode, size and time of change) and shared by every process that maps it; looking an address up is a binary
// search that allocates nothing. ELF files are hostile input: reads are bounded, the
// symbols kept per file are capped, and a file that changes while it is read is refused.
//
// Tables are immutable and safe for concurrent use; so is a Cache.
package elfsym
