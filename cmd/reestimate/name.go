package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/profd/profd/attribute"
	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
	"github.com/profd/profd/profileio"
)

// nameUnnamed names the capture's samples that no symbol named while profd ran, from symbol
// files written since (a perf map dumped at exit, a jitdump found later), as perf inject
// --jit names samples after the fact: each by the code that was at its address at its time.
// Symbols belong to the capture's process when it has one, else to the pid the file names
// (perf-PID.map, the jitdump's records). The samples are named as profd names those it
// keeps unnamed (attribute.NameUnnamed). With ownPids (captures of many runs merged) the
// symbols always belong to the pids the files name. It returns how many samples it named
// and how many stay unnamed.
func nameUnnamed(c *profileio.Capture, files []string, ownPids bool) (named, left uint64, err error) {
	m := jitmap.NewMap(jitmap.MapOptions{MaxEndedPerPid: 1 << 24})
	for _, f := range files {
		if err := applySymbolFile(m, c, f, ownPids); err != nil {
			return 0, c.UnnamedSamples(), err
		}
	}
	named, left = attribute.NameUnnamed(c, m)
	return named, left, nil
}

// applySymbolFile decodes the jitdump or perf map at path into m.
func applySymbolFile(m *jitmap.Map, c *profileio.Capture, path string, ownPids bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	format, _ := jitmap.DetectFormat(data)
	src := codeobj.SourcePerfMapFile
	if format == jitmap.FormatJitdump {
		src = codeobj.SourceJitdumpFile
	}
	var pid uint32 // 0: the records' own
	if len(c.Processes) == 1 && !ownPids {
		pid = c.Processes[0].Pid
	} else if src == codeobj.SourcePerfMapFile {
		// The file's own pid: its name's.
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "perf-"), ".map"), 10, 32)
		if err != nil {
			return fmt.Errorf("%s: the capture has %d processes and the file's name gives none of their pids (perf-PID.map)", path, len(c.Processes))
		}
		pid = uint32(n)
	}
	// A Stream, not a Decoder: a file a JIT wrote more than once holds several sessions.
	st := jitmap.NewStream(0, src, path, jitmap.DecoderOptions{})
	b, end := st.Write(data), st.Finish()
	events, errs := append(b.Events, end.Events...), append(b.Errs, end.Errs...)
	for i, e := range errs {
		if i == 10 {
			fmt.Fprintf(os.Stderr, "reestimate: %s: %d more bad records\n", path, len(errs)-i)
			break
		}
		fmt.Fprintf(os.Stderr, "reestimate: %s: %v\n", path, e)
	}
	for _, ev := range events {
		if pid != 0 {
			setPid(ev, pid)
		}
		_ = m.Apply(ev) // a move or unload of unknown code names nothing
	}
	return nil
}

// setPid makes ev an event of process pid.
func setPid(ev jitmap.Event, pid uint32) {
	switch ev := ev.(type) {
	case *jitmap.CodeLoad:
		ev.Pid = pid
	case *jitmap.CodeMove:
		ev.Pid = pid
	case *jitmap.CodeUnload:
		ev.Pid = pid
	}
}
