// A CPU-bound C# workload for profd's tests: three methods of different cost, called in a
// loop for the seconds of CPU time given (default 3; the process's, so a busy machine takes
// longer, not less). Mono compiles each method at its first call; mono --jitmap writes
// /tmp/perf-PID.map. Each method runs 25 times in a row: one call takes about a
// millisecond, and a program that moved from one to the next every millisecond or so would
// keep step with a sampler firing every 1.001 ms (999 Hz).
using System;
using System.Diagnostics;

class Hot {
    static int MixInts(int n) {
        uint h = 0x12345678;
        for (int i = 0; i < n; i++) {
            h = (h ^ (uint)i) * 0x9e3779b1;
            h ^= h >> 15;
        }
        return (int)h;
    }

    static long SumSquares(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += (long)(i % 7) * (i % 11);
        }
        return s;
    }

    static int SortChunk(int n) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) a[i] = (int)((i * 7919L) % n);
        Array.Sort(a);
        return a[n >> 1];
    }

    static void Main(string[] args) {
        double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 3;
        Process self = Process.GetCurrentProcess();
        TimeSpan end = self.TotalProcessorTime + TimeSpan.FromSeconds(seconds);
        long acc = 0;
        while (true) {
            self.Refresh();
            if (self.TotalProcessorTime >= end) break;
            for (int k = 0; k < 25; k++) acc += MixInts(300000);
            for (int k = 0; k < 25; k++) acc += SumSquares(150000);
            for (int k = 0; k < 25; k++) acc += SortChunk(2000);
        }
        Console.WriteLine("done " + acc);
    }
}
