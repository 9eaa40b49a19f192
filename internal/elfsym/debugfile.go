package elfsym

import (
	"hash/crc32"
	"io"
	"os"
	"path"
	"strings"
)

// debugFile is a separate debug file opened for its .symtab.
type debugFile struct {
	file *os.File
	ef   *elfFile
}

// debugDir is where distributions install separate debug files.
const debugDir = "/usr/lib/debug"

// findDebug looks for the separate debug file of ef (the file at p in the process's file
// system, under root): by build-id, then by .gnu_debuglink next to the file, in its .debug
// directory and under debugDir. A candidate whose build-id differs from the file's is
// refused (it belongs to another build); without a build-id, the debuglink's CRC-32 must
// match. It returns the file and its path, or nil.
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
	for _, cand := range candidates {
		if cand == path.Clean(p) {
			continue
		}
		f, err := openInRoot(root, cand)
		if err != nil {
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

// openInRoot opens p as a process whose root directory is root sees it: symbolic links
// are resolved inside root (a container's absolute link does not reach the host's files).
// An empty root is the file system's own.
func openInRoot(root, p string) (*os.File, error) {
	if root == "" {
		return os.Open(p)
	}
	return os.OpenInRoot(root, strings.TrimPrefix(p, "/"))
}
