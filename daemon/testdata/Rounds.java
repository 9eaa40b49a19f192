// A Java program for TestStacksJava: until the JVM is as many seconds old as its first
// argument, main() calls round(), which calls workloads/runtimes/Hot.java's mixInts a
// hundred times; then, until it is as old as the second, lateRound(), which calls
// LateHot.java's late a hundred times. Run with mixInts and late not inlined, HotSpot
// compiles them all, and the rounds' calls are calls from compiled code to compiled code.
public class Rounds {
    static int round() {
        int acc = 0;
        for (int k = 0; k < 100; k++) acc ^= Hot.mixInts(3000);
        return acc;
    }

    static long lateRound() {
        long acc = 0;
        for (int k = 0; k < 100; k++) acc ^= LateHot.late(3000);
        return acc;
    }

    public static void main(String[] args) {
        java.lang.management.RuntimeMXBean rt = java.lang.management.ManagementFactory.getRuntimeMXBean();
        long first = (long) (Double.parseDouble(args[0]) * 1000), second = (long) (Double.parseDouble(args[1]) * 1000);
        long acc = 0;
        while (rt.getUptime() < first) acc ^= round();
        while (rt.getUptime() < second) acc ^= lateRound();
        System.out.println("done " + acc);
    }
}
