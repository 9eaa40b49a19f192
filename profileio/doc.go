// Package profileio reads and writes profd's files: the capture (*.profd, the daemon's
// self-contained record of a profiling run, docs/capture-format.md), LLVM sample profiles
// (package sampleprof's model) in text and ext-binary form (what llvm-profdata-14, opt-14
// -passes=sample-profile and clang-14 -fprofile-sample-use read,
// docs/llvm-sample-profile.md), and pprof profiles.
//
// The daemon streams a capture as it runs; a capture cut short by a killed writer still
// reads back every complete section:
//
//	cw, err := profileio.NewCaptureWriter(f, profileio.CaptureMeta{Event: "cpu-clock", PeriodEvents: 1e6})
//	id, err := cw.AddCodeObject(pid, &obj) // a codeobj.Object
//	err = cw.AddSamples([]profileio.SampleRecord{{Object: id, Offset: 0x12, Count: 40}})
//	err = cw.Close(profileio.CaptureEnd{EndNs: now})
//
// Package profgen turns a capture into an LLVM sample profile; this package writes it:
//
//	c, err := profileio.ReadCapture(f)
//	err = profileio.WriteText(out, prof) // or WriteExtBinary; prof is a *sampleprof.Profile
//
// Every reader treats its input as hostile: it reports the byte offset (and for text the
// line) of a bad record as a *ParseError wrapping ErrMalformed, ErrTruncated,
// ErrUnsupported or ErrTooLarge, and bounds its allocations by the input's size.
//
// Readers and writers hold no shared state: distinct calls are safe to run concurrently;
// one CaptureWriter or Capture is not safe for concurrent use.
package profileio
