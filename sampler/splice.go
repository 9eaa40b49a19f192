package sampler

import "encoding/binary"

// spliced returns frames, a walk of a sample's copied stack that was cut short (the copy
// ended, as where Go's runtime switches to a stack of its own, or a rule stopped it), gone
// on by the kernel's walk of the same stack by frame pointers, which reads the process's
// memory and so goes on past the copy: chain is the sample's callchain (u64 nr, then nr
// entries). The two walks meet at the walk's last return address: from the kernel's walk,
// the entries after it are added; where it is not among them, frames is returned as it
// was. Where the two meet more than once (recursion), the meeting nearest to the same depth
// is taken: the kernel's walk skips the callers of functions without a frame pointer,
// never adds frames of its own.
func spliced(frames []uint64, chain []byte) []uint64 {
	i := len(frames) - 1
	if i < 1 { // the leaf is the sample's address in both: they meet there always
		return frames
	}
	user := userEntries(chain)
	j := user.nearest(frames[i], i)
	if j < 0 {
		return frames
	}
	for k := j + 1; k < user.len() && len(frames) < MaxStackFrames; k++ {
		frames = append(frames, user.at(k))
	}
	return frames
}

// entries are a callchain's entries, as its bytes.
type entries []byte

func (e entries) len() int        { return len(e) / 8 }
func (e entries) at(i int) uint64 { return binary.NativeEndian.Uint64(e[8*i:]) }

// nearest is the index, from 1 on, of the entry equal to ip nearest to at (the first of
// two as near); -1 when none is.
func (e entries) nearest(ip uint64, at int) int {
	best := -1
	for j := 1; j < e.len(); j++ {
		if e.at(j) == ip && (best < 0 || abs(j-at) < abs(best-at)) {
			best = j
		}
	}
	return best
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// userEntries is the user frames of a callchain's bytes (u64 nr, then nr entries): the
// entries after its user marker, up to any other marker.
func userEntries(chain []byte) entries {
	all := entries(chain[8:])
	from := -1
	for i := 0; i < all.len(); i++ {
		switch ip := all.at(i); {
		case ip == callchainUser:
			from = i + 1
		case ip >= callchainContextMax && from >= 0:
			return all[8*from : 8*i]
		}
	}
	if from < 0 {
		return nil
	}
	return all[8*from:]
}
