package elfsym

import (
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/profd/profd/internal/procfs"
)

// debugFile is a separate debug file opened for its .symtab.
type debugFile struct {
	file *os.File
	ef   *elfFile
}

// debugDir is where distributions install separate debug files.
const debugDir = "/usr/lib/debug"

// maxHashedBytes bounds a debug file hashed whole for its .gnu_debuglink CRC: the DWARF of a
// large program fits, a sparse file of terabytes does not.
const maxHashedBytes = 256 << 20

// findDebug looks for the separate debug file of ef (the file at p in the process's file
// system, under root): by build-id, then by .gnu_debuglink next to the file, in its .debug
// directory and under debugDir. The process names these paths (its file's debuglink, its
// directories, its links), so a candidate is opened as procfs.OpenFile does, and refused
// unless every user may read it: the table goes into the outputs of every process that maps
// the file, which their users read. A candidate whose build-id differs from the file's is refused
// (it belongs to another build); without a build-id, the debuglink's CRC-32 must match, and
// a candidate over maxHashedBytes is refused. It returns the file and its path, or nil.
func (c *Cache) findDebug(ef *elfFile, id, root, p string) (*debugFile, string) {
	var candidates []string
	if len(id) > 2 {
		candidates = append(candidates, path.Join(debugDir, ".build-id", id[:2], id[2:]+".debug"))
	}
	link, crc, hasLink := ef.debuglink()
	if hasLink && path.Base(link) == link && link != "." && link != ".." {
		dir := path.Dir(p)
		candidates = append(candidates, path.Join(dir, link), path.Join(dir, ".debug", link), path.Join(debugDir, dir, link))
	}
	want := procfs.Want{Reader: &procfs.Everyone}
	if id == "" {
		want.MaxBytes = maxHashedBytes // a candidate is hashed whole
	}
	for _, cand := range candidates {
		if cand == path.Clean(p) {
			continue
		}
		f, err := procfs.OpenFile(root, cand, want)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.cfg.Logger.Warn("elfsym: debug file refused", "file", p, "debug_file", cand, "err", err)
			}
			continue
		}
		key, err := statOf(f)
		if err != nil {
			f.Close()
			continue
		}
		dbg, err := openELF(f, key.size)
		if err != nil || !dbg.hasSymtab() {
			f.Close()
			continue
		}
		if got := dbg.buildID(); id != "" || got != "" {
			if got != id {
				c.cfg.Logger.Warn("elfsym: debug file refused: its build-id is not the file's",
					"file", p, "debug_file", cand, "build_id", id, "debug_build_id", got)
				f.Close()
				continue
			}
		} else if !hasLink || !crcMatches(f, key.size, crc) {
			f.Close()
			continue
		}
		return &debugFile{file: f, ef: dbg}, cand
	}
	return nil, ""
}

// crcMatches reports whether the CRC-32 (IEEE, as .gnu_debuglink has it) of f is want.
func crcMatches(f *os.File, size int64, want uint32) bool {
	h := crc32.NewIEEE()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, size)); err != nil {
		return false
	}
	return h.Sum32() == want
}
