// Package codeobj is the data model of JIT code: one function's machine code as a JIT
// emitted it at one place and time (Object), its line table (LineEntry) and where its record
// came from (Source). It is a leaf: the symbol decoders and map (jitmap), the capture and
// profile formats (profileio), the profile generator (profgen) and the accuracy tools all
// share these types, and codeobj imports nothing of profd's.
//
//	o := codeobj.Object{Name: "sieve", Addr: 0x7f0000001000, Size: 64, Source: codeobj.SourceFIFO}
//	if o.Contains(ip) && o.LiveAt(sampleNs) {
//		line := o.Lines[codeobj.CoveringLine(o.Lines, ip)]
//		_ = line
//	}
package codeobj
