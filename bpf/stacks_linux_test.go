package bpf

import (
	"slices"
	"testing"
)

// TestStackWords: a key's words at the stack pointer come out with the places its flags
// give them, up to the first zero (the program zeroes the ones it did not find), and none
// for a key without a user frame.
func TestStackWords(t *testing.T) {
	var k profileStackKey
	k.Nuser = 2
	k.User[0], k.User[1] = 0x401000, 0x402000
	k.Words = [WordCandidates]uint64{0x7f0000001234, 0x7f0000005678, 0}
	k.Flags = stackTruncated | 3<<stackSlotShift | 11<<(stackSlotShift+4)
	s := k.stack()
	if !slices.Equal(s.Words, []uint64{0x7f0000001234, 0x7f0000005678}) || s.WordSlots != [WordCandidates]uint8{3, 11, 0} {
		t.Errorf("words %#x in places %v, want 0x7f0000001234 and 0x7f0000005678 in 3 and 11", s.Words, s.WordSlots)
	}
	if !s.Truncated || s.KernelMode {
		t.Errorf("truncated %v, kernel mode %v: the slots' bits spilled into the flags", s.Truncated, s.KernelMode)
	}
	k.Words[2], k.Flags = 0x7f0000009abc, k.Flags|15<<(stackSlotShift+8)
	if s := k.stack(); len(s.Words) != 3 || s.WordSlots[2] != 15 {
		t.Errorf("three words: %#x in places %v", s.Words, s.WordSlots)
	}
	k.Nuser = 0
	if s := k.stack(); len(s.Words) != 0 {
		t.Errorf("a key without user frames gave words %#x", s.Words)
	}
}
