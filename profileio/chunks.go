package profileio

import (
	"runtime"
	"sync"
)

// chunkFunctions is how many functions a writer encodes as one unit of parallel work.
const chunkFunctions = 64

// chunkPlan says how many goroutines encode n functions.
func chunkPlan(n int) (workers int) {
	chunks := (n + chunkFunctions - 1) / chunkFunctions
	return max(1, min(runtime.GOMAXPROCS(0), chunks))
}

// encodeChunks splits n functions into chunks of chunkFunctions and, for each, calls
// encode(worker, from, to) and then emit(worker). encode calls run on `workers` goroutines
// at once (chunkPlan's count: the caller's and workers-1 that encodeChunks starts and waits
// for); emit calls run one at a time, in chunk order, on the goroutine that encoded the
// chunk. worker (0 ≤ worker < workers) identifies the goroutine, so encode can fill a
// per-goroutine buffer that emit then writes out: the output does not depend on the
// schedule. Once emit returns false, no further chunk is encoded or emitted. A nil emit
// skips the ordering.
func encodeChunks(n, workers int, encode func(worker, from, to int), emit func(worker int) bool) {
	chunks := (n + chunkFunctions - 1) / chunkFunctions
	var (
		mu      sync.Mutex
		turn    = sync.NewCond(&mu)
		handed  int // chunks handed to a goroutine
		emitted int // chunks emitted
		stopped bool
	)
	run := func(worker int) {
		for {
			mu.Lock()
			c := handed
			handed++
			stop := stopped
			mu.Unlock()
			if c >= chunks || stop {
				return
			}
			encode(worker, c*chunkFunctions, min(n, (c+1)*chunkFunctions))
			if emit == nil {
				continue
			}
			mu.Lock()
			for emitted != c {
				turn.Wait()
			}
			stop = stopped
			mu.Unlock()
			// Only the goroutine holding chunk `emitted` gets here; the others wait above.
			ok := !stop && emit(worker)
			mu.Lock()
			emitted++
			stopped = stopped || !ok
			turn.Broadcast()
			mu.Unlock()
		}
	}
	if workers <= 1 {
		run(0)
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(w)
		}()
	}
	run(0)
	wg.Wait()
}
