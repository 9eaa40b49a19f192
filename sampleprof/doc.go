// Package sampleprof is LLVM's sample-profile model: functions by name, each with its
// total and head samples, counts per source line (offset from the function's first line and
// base discriminator), call targets per line and inlined callees' profiles. Counts add with
// saturation, and DecodeDiscriminator splits a DWARF discriminator as LLVM 14 encodes it.
// profgen builds a Profile; profileio reads and writes it (text and ext-binary).
//
//	p := sampleprof.NewProfile()
//	f := &sampleprof.FunctionProfile{Name: "sieve", TotalSamples: 120, HeadSamples: 3}
//	f.AddBody(sampleprof.LineLocation{LineOffset: 2}, 100)
//	f.AddCall(sampleprof.LineLocation{LineOffset: 4}, "mark", 20)
//	p.Add(f)
//	err := profileio.WriteText(out, p)
//
// A Profile or FunctionProfile is not safe for concurrent use; the functions of the
// package hold no state and are safe to call concurrently.
package sampleprof
