// Package capmerge merges profd captures of one program's many processes, restarts and
// hosts into one capture, so that the repair (reestimate.RepairCode, through profgen) sees
// the sum of all samples instead of each capture's share.
//
// A Merger is fed captures one at a time and keeps only the merged result: JIT functions
// by name and code (SameCode: the code compared instruction by instruction, with the
// fields a JIT relocates masked), each with its samples summed by offset; native samples
// by file (build-id, else path) and file offset; samples outside any code by mapping name;
// call stacks by their frames; a capture's unnamed samples by the code another capture of
// the same process holds at their address and time. Inputs of different sampling or
// capture version, and the same capture given twice, are refused.
//
//	m := capmerge.New(capmerge.Options{})
//	for _, in := range inputs {
//		c, _ := profileio.ReadCapture(in.r) // errors handled by the caller
//		if err := m.Add(c, in.name, 1); err != nil {
//			return err
//		}
//	}
//	merged, summary := m.Result()
//
// A Merger is not safe for concurrent use.
package capmerge
