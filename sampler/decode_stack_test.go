package sampler

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/profd/profd/internal/unwind"
)

// chainRec is a sample record with a callchain of entries (markers included).
func chainRec(pid, tid uint32, ip, timeNs uint64, misc uint16, entries ...uint64) []byte {
	body := sampleRec(pid, tid, ip, timeNs, 1, misc)[recordHeaderBytes:]
	body = binary.NativeEndian.AppendUint64(body, uint64(len(entries)))
	for _, e := range entries {
		body = binary.NativeEndian.AppendUint64(body, e)
	}
	return rec(recordSample, misc, body)
}

func TestDecodeCallchain(t *testing.T) {
	a := newAggregate()
	a.stacks, a.kernel = true, true
	a.targets[10] = struct{}{}
	deep := []uint64{callchainUser}
	for i := 0; i < MaxStackFrames+1; i++ {
		deep = append(deep, 0x4000+uint64(i))
	}
	var stream []byte
	stream = append(stream, chainRec(10, 11, 0x1000, 5, miscUser, callchainUser, 0x1000, 0x2005, 0x3007)...)
	stream = append(stream, chainRec(10, 11, 0x1000, 9, miscUser, callchainUser, 0x1000, 0x2005, 0x3007)...)
	stream = append(stream, chainRec(10, 12, 0x1000, 7, miscUser, callchainUser, 0x1000, 0x2005, 0x3007)...)
	stream = append(stream, chainRec(10, 11, 0xffffffff81000010, 8, miscKernel,
		callchainKernel, 0xffffffff81000010, 0xffffffff81000020, callchainUser, 0x1100, 0x2005)...)
	stream = append(stream, chainRec(10, 11, 0x4000, 10, miscUser, deep...)...)
	if err := a.decodeStream(stream); err != nil {
		t.Fatal(err)
	}
	d := a.take(true)
	want := []StackCount{
		{PID: 10, TID: 11, User: []uint64{0x1000, 0x2005, 0x3007}, Count: Count{N: 2, FirstNs: 5, LastNs: 9}},
		{PID: 10, TID: 12, User: []uint64{0x1000, 0x2005, 0x3007}, Count: Count{N: 1, FirstNs: 7, LastNs: 7}},
		{PID: 10, TID: 11, User: []uint64{0x1100, 0x2005}, Kernel: []uint64{0xffffffff81000010, 0xffffffff81000020},
			Count: Count{N: 1, FirstNs: 8, LastNs: 8}},
		{PID: 10, TID: 11, User: deep[1 : MaxStackFrames+1], Truncated: true, Count: Count{N: 1, FirstNs: 10, LastNs: 10}},
	}
	if !reflect.DeepEqual(d.Stacks, want) {
		t.Errorf("stacks:\n%+v\nwant\n%+v", d.Stacks, want)
	}
	// The counts are the user-mode leaves; the kernel-mode sample counts as Kernel.
	wantCounts := map[Key]Count{{10, 0x1000}: {N: 3, FirstNs: 5, LastNs: 9}, {10, 0x4000}: {N: 1, FirstNs: 10, LastNs: 10}}
	if !reflect.DeepEqual(d.Counts, wantCounts) || a.stats.Kernel != 1 {
		t.Errorf("counts %+v, kernel %d", d.Counts, a.stats.Kernel)
	}
	if d2 := a.take(true); len(d2.Stacks) != 0 {
		t.Errorf("a second take has stacks: %+v", d2.Stacks)
	}

	// The kernel's limit covers kernel and user frames together: 4 kernel frames and 123 user
	// ones fill it, and the chain is marked cut.
	mixed := []uint64{callchainKernel, 0xffffffff81000010, 0xffffffff81000020, 0xffffffff81000030, 0xffffffff81000040, callchainUser}
	for i := 0; i < MaxStackFrames-4; i++ {
		mixed = append(mixed, 0x5000+uint64(i))
	}
	if err := a.decodeStream(chainRec(10, 11, 0xffffffff81000010, 11, miscKernel, mixed...)); err != nil {
		t.Fatal(err)
	}
	if d := a.take(true); len(d.Stacks) != 1 || !d.Stacks[0].Truncated || len(d.Stacks[0].User) != MaxStackFrames-4 {
		t.Errorf("a chain filling the kernel's limit with kernel and user frames: %+v", d.Stacks)
	}

	// Without kernel stacks a kernel-mode sample has no stack.
	a.kernel = false
	if err := a.decodeStream(chainRec(10, 11, 0xffffffff81000010, 8, miscKernel, callchainKernel, 0xffffffff81000010,
		callchainUser, 0x1100)); err != nil {
		t.Fatal(err)
	}
	if d := a.take(true); len(d.Stacks) != 0 {
		t.Errorf("kernel-mode sample without kernel stacks: %+v", d.Stacks)
	}
}

func TestDecodeCallchainBad(t *testing.T) {
	for name, r := range map[string][]byte{
		"no callchain":  sampleRec(10, 11, 0x1000, 5, 1, miscUser),
		"nr too large":  chainRec(10, 11, 0x1000, 5, miscUser, callchainUser)[:recordHeaderBytes+sampleBodyBytes+8],
		"no frame":      chainRec(10, 11, 0x1000, 5, miscUser, callchainUser),
		"empty":         chainRec(10, 11, 0x1000, 5, miscUser),
		"only a marker": chainRec(10, 11, 0x1000, 5, miscUser, callchainKernel),
	} {
		a := newAggregate()
		a.stacks = true
		a.targets[10] = struct{}{}
		// The record's own size field still says how long it is.
		binary.NativeEndian.PutUint16(r[6:], uint16(len(r)))
		if name == "nr too large" {
			binary.NativeEndian.PutUint64(r[recordHeaderBytes+sampleBodyBytes:], 1<<40)
		}
		if err := a.decodeStream(r); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s: err %v, want ErrBadRecord", name, err)
		}
		if d := a.take(true); len(d.Stacks) != 0 || len(d.Counts) != 0 {
			t.Errorf("%s: counted %+v %+v", name, d.Stacks, d.Counts)
		}
	}
}

func FuzzDecodeCallchain(f *testing.F) {
	f.Add(chainRec(1, 2, 0x1000, 5, miscUser, callchainUser, 0x1000, 0x2005))
	f.Add(chainRec(1, 2, 0xffffffff81000010, 5, miscKernel, callchainKernel, 0xffffffff81000010, callchainUser, 0x1000))
	f.Add(append(chainRec(1, 1, 1, 1, miscUser, callchainUser, 1), lostRec(2)...))
	// With the user registers and the stack's first word after the chain.
	ne := binary.NativeEndian
	withWord := chainRec(1, 2, 0x401010, 5, miscUser, callchainUser, 0x401010, 0x402005)
	for _, v := range []uint64{2, 0x7ffd0010, 0x7ffd0000, 0x401010, 8, 0x401505, 8} {
		withWord = ne.AppendUint64(withWord, v)
	}
	ne.PutUint16(withWord[6:], uint16(len(withWord)))
	f.Add(withWord)
	// And its first four words, the return address the third.
	withWords := chainRec(1, 2, 0x401010, 5, miscUser, callchainUser, 0x401010, 0x402005)
	for _, v := range []uint64{2, 0x7ffd0010, 0x7ffd0000, 0x401010, 32, 7, 0x7ffd0040, 0x401505, 0, 32} {
		withWords = ne.AppendUint64(withWords, v)
	}
	ne.PutUint16(withWords[6:], uint16(len(withWords)))
	f.Add(withWords)
	leaves := newLeafCallers(Config{Stacks: true}, nil, nil)
	leaves.Add(1) // the seeds' process: its words are decided by its files' frame information
	f.Cleanup(leaves.Close)
	f.Fuzz(func(t *testing.T, stream []byte) {
		// By frame pointers, with the word at the stack pointer (the records carry user
		// registers and stack after the chain) and without.
		for _, withWord := range []bool{false, true} {
			a := newAggregate()
			a.stacks, a.kernel = true, true
			a.targets[1] = struct{}{}
			if withWord {
				a.leaves = leaves
			}
			a.decodeStream(stream)
			checkDecoded(t, a)
		}
	})
}

// checkDecoded checks what a decoded: stacks within bounds, with frames, counted in its
// leaf counts and stats.
func checkDecoded(t *testing.T, a *aggregate) {
	d := a.take(true)
	var user, inStacks uint64
	for _, st := range d.Stacks {
		if len(st.User) > MaxStackFrames || len(st.Kernel) > maxKernelFrames || st.N == 0 || st.FirstNs > st.LastNs {
			t.Fatalf("stack %+v", st)
		}
		if len(st.User) == 0 && len(st.Kernel) == 0 {
			t.Fatalf("stack without frames: %+v", st)
		}
		inStacks += st.N
	}
	for _, c := range d.Counts {
		user += c.N
	}
	if user != a.stats.Samples || inStacks != user+a.stats.Kernel {
		t.Fatalf("counts %d, stacks %d, samples %d, kernel %d", user, inStacks, a.stats.Samples, a.stats.Kernel)
	}
}

// FuzzDecodeUserStack: user registers and stack of any bytes decode without a panic, the
// stack within them.
func FuzzDecodeUserStack(f *testing.F) {
	ne := binary.NativeEndian
	seed := ne.AppendUint64(nil, 2)
	seed = ne.AppendUint64(ne.AppendUint64(ne.AppendUint64(seed, 0x7ffd0010), 0x7ffd0000), 0x401000)
	seed = ne.AppendUint64(seed, 16)
	seed = append(seed, make([]byte, 16)...)
	seed = ne.AppendUint64(seed, 8)
	f.Add(seed)
	f.Add(ne.AppendUint64(ne.AppendUint64(nil, 0), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := decodeUserStack(b)
		if err == nil && len(u.stack) > len(b) {
			t.Fatalf("a stack of %d bytes from %d", len(u.stack), len(b))
		}
		if err != nil && !errors.Is(err, ErrBadRecord) {
			t.Fatalf("error %v does not wrap ErrBadRecord", err)
		}
	})
}

// TestUnwoundStackKey: unwound, two samples with the same registers and stack are one
// chain, whatever the kernel's walk by frame pointers found (through code without frame
// pointers, a stray address each time); kernel frames still tell chains apart.
func TestUnwoundStackKey(t *testing.T) {
	a := newAggregate()
	a.stacks, a.kernel = true, true
	a.unwind = unwind.New(unwind.Config{})
	t.Cleanup(a.unwind.Close)
	a.targets[10] = struct{}{}
	ne := binary.NativeEndian
	// A frame-pointer walk: BP points at a saved BP of 0 and a return address.
	stack := make([]byte, 64)
	ne.PutUint64(stack[16:], 0)
	ne.PutUint64(stack[24:], 0x4005)
	rec := func(misc uint16, entries ...uint64) []byte {
		body := sampleRec(10, 11, 0x1000, 5, 1, misc)[recordHeaderBytes:]
		body = ne.AppendUint64(body, uint64(len(entries)))
		for _, e := range entries {
			body = ne.AppendUint64(body, e)
		}
		body = ne.AppendUint64(body, regsABI64)
		body = ne.AppendUint64(ne.AppendUint64(ne.AppendUint64(body, 0x7000+16), 0x7000), 0x1000) // BP, SP, IP
		body = ne.AppendUint64(body, uint64(len(stack)))
		body = append(body, stack...)
		body = ne.AppendUint64(body, uint64(len(stack)))
		return rec(recordSample, misc, body)
	}
	var stream []byte
	stream = append(stream, rec(miscUser, callchainUser, 0x1000, 0xdead01)...)
	stream = append(stream, rec(miscUser, callchainUser, 0x1000, 0xdead02, 0xdead03)...)
	stream = append(stream, rec(miscKernel, callchainKernel, 0xffffffff81000010, callchainUser, 0x1000, 0xdead04)...)
	if err := a.decodeStream(stream); err != nil {
		t.Fatal(err)
	}
	d := a.take(true)
	if len(d.Stacks) != 2 {
		t.Fatalf("%d chains, want 2 (one user-mode, one with kernel frames): %+v", len(d.Stacks), d.Stacks)
	}
	if st := d.Stacks[0]; st.N != 2 || !reflect.DeepEqual(st.User, []uint64{0x1000, 0x4005}) {
		t.Errorf("the user-mode chain: %d samples, frames %#x; want 2 and the unwound [0x1000 0x4005]", st.N, st.User)
	}
}
