package oracle

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/jitmap"
)

// ReadJitdump reads the code objects of process pid from a jitdump file (lli-14 writes
// $JITDUMPDIR/.debug/jit/*/jit-PID.dump). Any bad record is an error: the oracle needs the
// whole map.
func ReadJitdump(path string, pid uint32) ([]codeobj.Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("oracle: jitdump: %w", err)
	}
	defer f.Close()
	d := jitmap.NewDecoder(pid, codeobj.SourceJitdumpFile, jitmap.DecoderOptions{})
	var objs []codeobj.Object
	take := func(events []jitmap.Event, errs []error) error {
		if len(errs) > 0 {
			return fmt.Errorf("oracle: jitdump %s: %w", path, errors.Join(errs...))
		}
		for _, ev := range events {
			if l, ok := ev.(*jitmap.CodeLoad); ok {
				objs = append(objs, l.Object)
			}
		}
		return nil
	}
	buf := make([]byte, 64<<10)
	for {
		n, rerr := f.Read(buf)
		if err := take(d.Write(buf[:n])); err != nil {
			return nil, err
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return nil, fmt.Errorf("oracle: jitdump %s: %w", path, rerr)
		}
	}
	if err := take(d.Finish()); err != nil {
		return nil, err
	}
	return objs, nil
}
