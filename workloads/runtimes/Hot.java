// A CPU-bound Java workload for profd's tests: three methods of different cost, called in a
// loop for the number of seconds of its CPU time given (default 3): on a busy machine it
// runs longer, not less. HotSpot compiles them with C1 and C2; -XX:+DumpPerfMapAtExit or
// jcmd PID Compiler.perfmap writes /tmp/perf-PID.map. With a second argument "wait" it
// prints "waiting" and starts only once a byte arrives on stdin, so that profilers attached
// one after the other sample the same span (the methods' shares change as HotSpot moves
// them from C1's code to C2's). Each method runs 25 times in a row: one call takes about a
// millisecond, and a program that moved from one to the next every millisecond or so would
// keep step with a sampler firing every 1.001 ms (999 Hz), which then sees mostly one phase
// of it.
public class Hot {
    static int mixInts(int n) {
        int h = 0x12345678;
        for (int i = 0; i < n; i++) {
            h = (h ^ i) * 0x9e3779b1;
            h ^= h >>> 15;
        }
        return h;
    }

    static long sumSquares(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) {
            s += (long) (i % 7) * (i % 11);
        }
        return s;
    }

    static int sortChunk(int n) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) a[i] = (int) ((i * 7919L) % n);
        java.util.Arrays.sort(a);
        return a[n >> 1];
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        java.lang.management.ThreadMXBean cpu = java.lang.management.ManagementFactory.getThreadMXBean();
        if (args.length > 1 && args[1].equals("wait")) {
            System.out.println("waiting");
            System.out.flush();
            System.in.read();
        }
        long end = cpu.getCurrentThreadCpuTime() + (long) (seconds * 1e9);
        long acc = 0;
        while (cpu.getCurrentThreadCpuTime() < end) {
            for (int k = 0; k < 25; k++) acc ^= mixInts(300000);
            for (int k = 0; k < 25; k++) acc ^= sumSquares(150000);
            for (int k = 0; k < 25; k++) acc ^= sortChunk(2000);
        }
        System.out.println("done " + acc);
    }
}
